{{/* The chart and its version, as the helm.sh/chart label carries it. */}}
{{- define "ome-spread.chart" -}}
{{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels that select one part of the release: `component` is controller or policy. */}}
{{- define "ome-spread.selectorLabels" -}}
app.kubernetes.io/name: {{ .context.Chart.Name }}
app.kubernetes.io/instance: {{ .context.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The standard labels of every object of the release (Kubernetes' recommended labels and
helm's), called with (dict "context" $ "component" "controller" or "policy"). */}}
{{- define "ome-spread.labels" -}}
{{ include "ome-spread.selectorLabels" . }}
app.kubernetes.io/version: {{ .context.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: ome-spread
app.kubernetes.io/managed-by: {{ .context.Release.Service }}
helm.sh/chart: {{ include "ome-spread.chart" .context }}
{{- end }}

{{/* The controller's ServiceAccount, the subject of each of its bindings. */}}
{{- define "ome-spread.subject" -}}
- kind: ServiceAccount
  name: ome-spread-controller
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/* The controller's image: by digest when one is set, else by tag (the chart's appVersion by
default, the tag both the image and the policy are pushed with). */}}
{{- define "ome-spread.image" -}}
{{- $image := .Values.controller.image }}
{{- $repository := required "controller.image.repository is required: the image built from deploy/Dockerfile, pushed (e.g. YOUR_REGISTRY/ome-spread-controller)" $image.repository }}
{{- if $image.digest }}
{{- printf "%s@%s" $repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/* The controller's settings file without the policy: the `settings` value as YAML. */}}
{{- define "ome-spread.settingsFile" -}}
{{ toYaml .Values.settings }}
{{- end }}
