package tracing

// adapterVariables are the OTEL_* variables the operator passes on to the adapters it
// renders. Not OTEL_EXPORTER_OTLP_*HEADERS: they hold the collector's credentials, and
// a Deployment's env is readable by anyone who may read Deployments in the tenant's
// namespace. Not certificate paths: the files are not mounted in adapter pods. Not
// OTEL_SERVICE_NAME: adapters are cantus-adapter.
var adapterVariables = []string{
	"OTEL_TRACES_EXPORTER",
	"OTEL_TRACES_SAMPLER",
	"OTEL_TRACES_SAMPLER_ARG",
	"OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL",
	"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_EXPORTER_OTLP_INSECURE",
	"OTEL_EXPORTER_OTLP_TRACES_INSECURE",
	"OTEL_EXPORTER_OTLP_TIMEOUT",
	"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
	"OTEL_EXPORTER_OTLP_COMPRESSION",
	"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
	"OTEL_BSP_SCHEDULE_DELAY",
	"OTEL_BSP_EXPORT_TIMEOUT",
	"OTEL_BSP_MAX_QUEUE_SIZE",
	"OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
	"OTEL_RESOURCE_ATTRIBUTES",
}

// AdapterEnv returns the OTEL_* variables (name → value) the adapters get when the
// operator's own environment turns tracing on; none when it is off, so that
// Deployments of an operator without tracing carry no tracing env at all.
func AdapterEnv(getenv func(string) string) map[string]string {
	cfg, err := ConfigFromEnv(getenv)
	if err != nil || cfg.Exporter != "otlp" {
		return nil
	}
	env := map[string]string{}
	for _, name := range adapterVariables {
		if v := getenv(name); v != "" {
			env[name] = v
		}
	}
	env["OTEL_TRACES_EXPORTER"] = "otlp"
	return env
}
