{{/* Names and labels shared by every template. */}}

{{- define "hookwheel.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* "<release>-<chart>", or the release name alone when it already contains the chart's name. */}}
{{- define "hookwheel.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "hookwheel.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hookwheel.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hookwheel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "hookwheel.labels" -}}
helm.sh/chart: {{ include "hookwheel.chart" . }}
{{ include "hookwheel.selectorLabels" . }}
app.kubernetes.io/version: {{ include "hookwheel.imageTag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hookwheel
{{- end }}

{{- define "hookwheel.imageTag" -}}
{{- .Values.image.tag | default .Chart.AppVersion | trunc 63 }}
{{- end }}

{{- define "hookwheel.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{- define "hookwheel.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hookwheel.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the containers read their credentials from. */}}
{{- define "hookwheel.secretName" -}}
{{- .Values.secret.existingSecret | default (include "hookwheel.fullname" .) }}
{{- end }}

{{/*
One environment variable from the Secret: (list $ "VARIABLE" "valueKey" required).
The optional ones are marked optional, so an existing Secret without them starts the pods with the
setting off, and the chart's Secret leaves out the keys whose values are empty.
*/}}
{{- define "hookwheel.secretEnv" -}}
{{- $root := index . 0 }}
{{- $secret := index . 1 }}
{{- $var := index . 2 }}
{{- $field := index . 3 }}
{{- $required := index . 4 -}}
- name: {{ $var }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ index $root.Values.secret.keys $field }}
      {{- if not $required }}
      optional: true
      {{- end }}
{{- end }}

{{/* The database variables, which the migration Job needs as well: (list $ secretName). */}}
{{- define "hookwheel.databaseEnv" -}}
{{- $root := index . 0 }}
{{- $secret := index . 1 -}}
{{ include "hookwheel.secretEnv" (list $root $secret "DATABASE_URL" "databaseUrl" true) }}
{{ include "hookwheel.secretEnv" (list $root $secret "HOOKWHEEL_DATABASE_DIRECT_URL" "databaseDirectUrl" false) }}
{{- end }}

{{/* Settings every hookwheel container gets, the migration Job's included. */}}
{{- define "hookwheel.configEnv" -}}
{{- $c := .Values.config -}}
- name: HOOKWHEEL_LOG_LEVEL
  value: {{ $c.logLevel | quote }}
- name: HOOKWHEEL_LOG_FORMAT
  value: {{ $c.logFormat | quote }}
{{- with $c.databasePooler }}
- name: HOOKWHEEL_DATABASE_POOLER
  value: {{ . | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The environment of the API and dispatcher containers. */}}
{{- define "hookwheel.serveEnv" -}}
{{- $c := .Values.config }}
{{- $secret := include "hookwheel.secretName" . -}}
- name: HOOKWHEEL_ADDR
  value: {{ printf ":%d" (int .Values.ports.http) | quote }}
- name: HOOKWHEEL_METRICS_ADDR
  value: {{ printf ":%d" (int .Values.ports.metrics) | quote }}
{{ include "hookwheel.databaseEnv" (list . $secret) }}
{{ include "hookwheel.secretEnv" (list . $secret "REDIS_URL" "redisUrl" true) }}
{{ include "hookwheel.secretEnv" (list . $secret "HOOKWHEEL_ADMIN_TOKEN" "adminToken" false) }}
{{ include "hookwheel.secretEnv" (list . $secret "HOOKWHEEL_ENCRYPTION_KEY" "encryptionKey" false) }}
{{ include "hookwheel.secretEnv" (list . $secret "HOOKWHEEL_SESSION_KEY" "sessionKey" false) }}
- name: HOOKWHEEL_ALLOW_PRIVATE_TARGETS
  value: {{ $c.allowPrivateTargets | quote }}
{{- with $c.targetAllowCIDRs }}
- name: HOOKWHEEL_TARGET_ALLOW_CIDRS
  value: {{ join "," . | quote }}
{{- end }}
{{- with $c.trustedProxies }}
- name: HOOKWHEEL_TRUSTED_PROXIES
  value: {{ join "," . | quote }}
{{- end }}
{{- with $c.retention }}
- name: HOOKWHEEL_RETENTION
  value: {{ . | quote }}
{{- end }}
{{- with $c.redisPrefix }}
- name: HOOKWHEEL_REDIS_PREFIX
  value: {{ . | quote }}
{{- end }}
{{- with $c.shutdownTimeout }}
- name: HOOKWHEEL_SHUTDOWN_TIMEOUT
  value: {{ . | quote }}
{{- end }}
{{- if not (kindIs "invalid" $c.senders) }}
- name: HOOKWHEEL_SENDERS
  value: {{ $c.senders | int | quote }}
{{- end }}
{{- if not (kindIs "invalid" $c.sendersPerTenant) }}
- name: HOOKWHEEL_SENDERS_PER_TENANT
  value: {{ $c.sendersPerTenant | int | quote }}
{{- end }}
{{- if not (kindIs "invalid" $c.metricsTopTargets) }}
- name: HOOKWHEEL_METRICS_TOP_TARGETS
  value: {{ $c.metricsTopTargets | int | quote }}
{{- end }}
{{ include "hookwheel.configEnv" . }}
{{- end }}

{{/*
GOMEMLIMIT from the container's memory limit: the Go runtime then collects garbage harder as it
nears the limit instead of being killed for crossing it. Takes the container's resources.
*/}}
{{- define "hookwheel.goMemLimitEnv" -}}
{{- if (.limits).memory -}}
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- end }}
{{- end }}

{{/* Affinity, spread and placement of one component: (list $ componentValues componentName). */}}
{{- define "hookwheel.placement" -}}
{{- $root := index . 0 }}
{{- $v := index . 1 }}
{{- $component := index . 2 -}}
{{- with ($v.nodeSelector | default $root.Values.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with ($v.tolerations | default $root.Values.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $affinity := $v.affinity | default $root.Values.affinity }}
affinity:
{{- if $affinity }}
  {{- toYaml $affinity | nindent 2 }}
{{- else }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "hookwheel.selectorLabels" $root | nindent 14 }}
              app.kubernetes.io/component: {{ $component }}
{{- end }}
{{- with ($v.topologySpreadConstraints | default $root.Values.topologySpreadConstraints) }}
{{- $selector := dict "matchLabels" (merge (include "hookwheel.selectorLabels" $root | fromYaml) (dict "app.kubernetes.io/component" $component)) }}
{{- $constraints := list }}
{{- range . }}
{{- $constraints = append $constraints (merge (dict "labelSelector" $selector) (deepCopy .)) }}
{{- end }}
topologySpreadConstraints:
  {{- toYaml $constraints | nindent 2 }}
{{- end }}
{{- end }}
