package tracing

import "go.opentelemetry.io/otel/attribute"

// Attribute keys. Where OpenTelemetry's semantic conventions name one (MCP, gen-ai, RPC,
// HTTP), that name is used; the cantus.* ones have no convention.
const (
	MCPMethodName          = attribute.Key("mcp.method.name")
	MCPSessionID           = attribute.Key("mcp.session.id")
	MCPProtocolVersion     = attribute.Key("mcp.protocol.version")
	MCPResourceURI         = attribute.Key("mcp.resource.uri")
	JSONRPCRequestID       = attribute.Key("jsonrpc.request.id")
	JSONRPCProtocolVersion = attribute.Key("jsonrpc.protocol.version")
	GenAIToolName          = attribute.Key("gen_ai.tool.name")
	GenAIPromptName        = attribute.Key("gen_ai.prompt.name")
	GenAIOperationName     = attribute.Key("gen_ai.operation.name")
	ErrorType              = attribute.Key("error.type")
	HTTPRequestMethod      = attribute.Key("http.request.method")
	HTTPStatusCode         = attribute.Key("http.response.status_code")
	URLFull                = attribute.Key("url.full")
	URLPath                = attribute.Key("url.path")
	ServerAddress          = attribute.Key("server.address")
	K8sNamespaceName       = attribute.Key("k8s.namespace.name")

	// CallerKind is the kind of identity a tool's caller proved (bearer, oidc,
	// serviceaccount, anonymous); never the token or the subject.
	CallerKind = attribute.Key("cantus.caller.kind")
	// CallOutcome is the call's outcome as the audit log names it: ok, error,
	// refused, busy.
	CallOutcome = attribute.Key("cantus.call.outcome")
	// ImportName is the RemoteToolImport a forwarded call goes through.
	ImportName = attribute.Key("cantus.import")

	// Controller, ObjectName, ReconcileOutcome (done, requeued, error) and
	// ReconcileRequeueAfter describe the operator's span of one reconcile.
	Controller            = attribute.Key("cantus.controller")
	ObjectName            = attribute.Key("cantus.object.name")
	ReconcileOutcome      = attribute.Key("cantus.reconcile.outcome")
	ReconcileRequeueAfter = attribute.Key("cantus.reconcile.requeue_after_ms")
)
