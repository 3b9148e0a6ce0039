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
One environment variable from the Secret: (list $ secretName "VARIABLE" "valueKey" required).
The optional ones are marked optional, so an existing Secret without them starts the pods with the
setting off, and the chart's Secret leaves out the keys whose values are empty. A required one
missing from the Secret keeps the container from starting (CreateContainerConfigError, naming the
key) instead of letting it run without the setting.
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
{{- /*
Required unless plaintext is asked for: a node without the key would store new signing secrets in
plaintext and could not open those already sealed, so deliveries would fail, with nothing to show
for it at start.
*/}}
{{ include "hookwheel.secretEnv" (list . $secret "HOOKWHEEL_ENCRYPTION_KEY" "encryptionKey" (not .Values.secret.allowPlaintextSecrets)) }}
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
GOMEMLIMIT at 90 % of the container's memory limit: the Go runtime then collects garbage harder as
it nears the limit instead of being killed for crossing it. It is a soft limit on the memory the
runtime manages, while the cgroup also charges what the runtime does not count (the kernel's socket
buffers, the page cache of files under /tmp) and the heap may overshoot while a collection runs: at
100 % the OOM killer strikes first. A resourceFieldRef cannot scale the limit, so the value is worked
out here, in bytes. Takes the container's resources.
*/}}
{{- define "hookwheel.goMemLimitEnv" -}}
{{- with (.limits).memory -}}
- name: GOMEMLIMIT
  value: {{ include "hookwheel.quantityBytes" . | float64 | mulf 0.9 | floor | int64 | quote }}
{{- end }}
{{- end }}

{{/*
The bytes of a Kubernetes quantity as values.schema.json lets it through: a number, or digits with
an optional fraction and suffix (128Mi, 1.5Gi, 500M, 268435456).
*/}}
{{- define "hookwheel.quantityBytes" -}}
{{- if or (kindIs "float64" .) (kindIs "int" .) (kindIs "int64" .) }}
{{- . | float64 }}
{{- else }}
{{- $q := toString . }}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $q }}
{{- $suffix := trimPrefix $number $q }}
{{- $factors := dict "" 1.0 "m" 0.001 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- if or (not $number) (not (hasKey $factors $suffix)) }}
{{- fail (printf "memory limit %q: want a quantity such as 256Mi" $q) }}
{{- end }}
{{- mulf ($number | float64) (get $factors $suffix) }}
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
