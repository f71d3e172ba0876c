{{- define "ctrlmesh-agent.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ctrlmesh-agent.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ctrlmesh-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ctrlmesh-agent.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "ctrlmesh-agent.webhookHost" -}}
{{- printf "%s.%s.svc" (include "ctrlmesh-agent.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "ctrlmesh-agent.webhookSecret" -}}
{{- .Values.webhook.tlsSecret | default (printf "%s-webhook-tls" (include "ctrlmesh-agent.fullname" .)) -}}
{{- end -}}

{{- define "ctrlmesh-agent.clusterName" -}}
{{- .Values.clusterName | default .Release.Name -}}
{{- end -}}

{{- /* The agent's MutatingWebhookConfiguration: webhookConfigurationName in src/agent/webhook.ts. */ -}}
{{- define "ctrlmesh-agent.webhookConfigurationName" -}}
{{- regexReplaceAll "[^a-z0-9.-]" (printf "ctrlmesh-agent-%s" (include "ctrlmesh-agent.clusterName" .) | lower) "-" -}}
{{- end -}}

{{- /* Where the agent's NATS Secret files are mounted (one projected, read-only volume). */ -}}
{{- define "ctrlmesh-agent.credentialsDir" -}}/etc/ctrlmesh/credentials{{- end -}}
