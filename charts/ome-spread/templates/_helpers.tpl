{{/* The labels of every object of the controller; its pods are selected by the name alone. */}}
{{- define "ome-spread.labels" -}}
app.kubernetes.io/name: ome-spread-controller
app.kubernetes.io/part-of: ome-spread
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The controller's ServiceAccount, the subject of each of its bindings. */}}
{{- define "ome-spread.subject" -}}
- kind: ServiceAccount
  name: ome-spread-controller
  namespace: {{ .Release.Namespace }}
{{- end }}
