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

{{/* The image reference: repository@digest when a digest is set, else repository:tag. */}}
{{- define "gw.image" -}}
{{- if .Values.image.digest -}}
{{- if not (hasPrefix "sha256:" .Values.image.digest) -}}
{{- fail "image.digest must be sha256:<hex>" -}}
{{- end -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Whether several replicas may run (a fixed count above one, or autoscaling). */}}
{{- define "gw.multi" -}}
{{- if or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled -}}true{{- end -}}
{{- end -}}

{{/* Whether /data is a PersistentVolumeClaim: one replica keeping its records in it (no Redis). */}}
{{- define "gw.persistent" -}}
{{- if and .Values.persistence.enabled (not .Values.redis.address) (not (include "gw.multi" .)) -}}true{{- end -}}
{{- end -}}

{{/* The claim /data mounts. */}}
{{- define "gw.claimName" -}}
{{- default (printf "%s-data" (include "gw.fullname" .)) .Values.persistence.existingClaim -}}
{{- end -}}
