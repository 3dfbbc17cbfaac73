{{/*
The name of the operator's own objects: the release name when it already says
cantus-operator, else <release>-cantus-operator.
*/}}
{{- define "cantus.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Selector labels. app.kubernetes.io/name must stay cantus-operator: the NetworkPolicies of
SkillServers let the operator's pods in by this label (workload.OperatorPeer).
*/}}
{{- define "cantus.selectorLabels" -}}
app.kubernetes.io/name: cantus-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cantus.labels" -}}
{{ include "cantus.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The operator image: repository@digest, else repository:tag (tag defaults to appVersion). */}}
{{- define "cantus.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The rules of a Role or ClusterRole kept in files/rbac (copied from config/rbac by
`make chart`), so that the chart grants exactly what controller-gen and config/ say.
Arguments: (list $ "files/rbac/role.yaml" "ClusterRole" "cantus-operator").
*/}}
{{- define "cantus.rulesOf" -}}
{{- $root := index . 0 -}}
{{- $found := false -}}
{{- range $doc := splitList "\n---" ($root.Files.Get (index . 1)) -}}
{{- $obj := fromYaml $doc -}}
{{- if and (eq (get $obj "kind") (index $ 2)) (eq (dig "metadata" "name" "" $obj) (index $ 3)) -}}
{{- $found = true -}}
{{- toYaml (get $obj "rules") -}}
{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "%s has no %s %s: run make chart" (index . 1) (index . 2) (index . 3)) -}}
{{- end -}}
{{- end -}}
