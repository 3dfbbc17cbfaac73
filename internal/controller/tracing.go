package controller

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cantus-dev/cantus-operator/internal/tracing"
)

// traced makes a span of every reconcile of next, the controller name's: the object,
// the outcome (done, requeued, error) and the error. When tracing is off it is next's
// Reconcile and nothing more. Work the reconcile does over HTTP (verifying a server with
// MCP, a RemoteToolImport's handshake) carries the span's trace context on.
func traced(name string, next reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		tracer := tracing.Tracer()
		if tracer == nil {
			return next.Reconcile(ctx, req)
		}
		ctx, span := tracer.Start(ctx, "reconcile "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
			tracing.Controller.String(name), tracing.K8sNamespaceName.String(req.Namespace), tracing.ObjectName.String(req.Name)))
		defer span.End()
		// The log lines of this reconcile name its trace, to go from one to the other.
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("traceID", span.SpanContext().TraceID().String()))
		result, err := next.Reconcile(ctx, req)
		switch {
		case err != nil:
			span.SetAttributes(tracing.ReconcileOutcome.String("error"), tracing.ErrorType.String("reconcile_error"))
			span.SetStatus(codes.Error, err.Error())
		case result.RequeueAfter > 0:
			span.SetAttributes(tracing.ReconcileOutcome.String("requeued"), tracing.ReconcileRequeueAfter.Int64(result.RequeueAfter.Milliseconds()))
		default:
			span.SetAttributes(tracing.ReconcileOutcome.String("done"))
		}
		return result, err
	})
}
