{{- define "ctrlmesh-hub.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ctrlmesh-hub.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ctrlmesh-hub.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ctrlmesh-hub.tokensSecret" -}}
{{- if .Values.bootstrapTokens.generateFor -}}
{{- printf "%s-tokens" (include "ctrlmesh-hub.fullname" .) -}}
{{- else -}}
{{- required "bootstrapTokens.existingSecret (or bootstrapTokens.generateFor) is required: agents register with its tokens" .Values.bootstrapTokens.existingSecret -}}
{{- end -}}
{{- end -}}

{{- /* Where the hub's Secret files are mounted (one projected, read-only volume). */ -}}
{{- define "ctrlmesh-hub.credentialsDir" -}}/etc/ctrlmesh/credentials{{- end -}}
