{{/* The chart's name. */}}
{{- define "gw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name. */}}
{{- define "gw.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels selecting the gateway's pods. */}}
{{- define "gw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "gw.labels" -}}
{{ include "gw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The Caddyfile: the value "caddyfile", or files/Caddyfile rendered. */}}
{{- define "gw.caddyfile" -}}
{{- if .Values.caddyfile -}}
{{- .Values.caddyfile -}}
{{- else -}}
{{- tpl (.Files.Get "files/Caddyfile") . -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the gateway's secrets. */}}
{{- define "gw.secretName" -}}
{{- default (include "gw.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}
