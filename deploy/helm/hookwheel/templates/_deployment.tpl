{{/*
The API and dispatcher Deployments differ only in their flags, probes' role and sizes:
(list $ "api"|"dispatcher").
*/}}
{{- define "hookwheel.deployment" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- $v := index $root.Values $component }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "hookwheel.fullname" $root }}-{{ $component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "hookwheel.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $component }}
spec:
  {{- if not (and (eq $component "api") $v.autoscaling.enabled) }}
  replicas: {{ $v.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "hookwheel.selectorLabels" $root | nindent 6 }}
      app.kubernetes.io/component: {{ $component }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      # A new pod is up before an old one goes, so a one-replica install keeps serving.
      maxSurge: 1
      maxUnavailable: 0
  template:
    metadata:
      {{- $annotations := merge (deepCopy ($v.podAnnotations | default dict)) ($root.Values.podAnnotations | default dict) }}
      {{- if not $root.Values.secret.existingSecret }}
      {{- /* Restarts the pods when the chart's Secret changes: environment variables are read at start. */}}
      {{- $_ := set $annotations "checksum/secret" (include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum) }}
      {{- end }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      labels:
        {{- include "hookwheel.labels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ $component }}
        {{- with (merge (deepCopy ($v.podLabels | default dict)) ($root.Values.podLabels | default dict)) }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "hookwheel.serviceAccountName" $root }}
      # hookwheel never calls the Kubernetes API.
      automountServiceAccountToken: false
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
      {{- include "hookwheel.placement" (list $root $v $component) | trim | nindent 6 }}
      containers:
        - name: {{ $component }}
          image: {{ include "hookwheel.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            - serve
            - --{{ $component }}-only
            # The migration Job migrates before every install and upgrade.
            - --no-migrate
          ports:
            - name: http
              containerPort: {{ $root.Values.ports.http }}
              protocol: TCP
            - name: metrics
              containerPort: {{ $root.Values.ports.metrics }}
              protocol: TCP
          env:
            {{- include "hookwheel.serveEnv" $root | nindent 12 }}
            {{- with (include "hookwheel.goMemLimitEnv" $v.resources) }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $v.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: http
            {{- toYaml $root.Values.probes.liveness | nindent 12 }}
          readinessProbe:
            httpGet:
              path: /readyz
              port: http
            {{- toYaml $root.Values.probes.readiness | nindent 12 }}
          {{- with $v.preStopSleepSeconds }}
          lifecycle:
            # SIGTERM closes the listener at once, while endpoints, kube-proxy and ingress
            # controllers may still send new connections to the pod for a few seconds after it
            # began terminating; those would be refused. Serving on until they have caught up
            # keeps a rollout or drain from failing requests. The image (debian-slim) has sleep;
            # the wait counts within terminationGracePeriodSeconds.
            preStop:
              exec:
                command: ["sleep", {{ . | int | toString | quote }}]
          {{- end }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
      volumes:
        # The root file system is read-only; Go may still spill large request bodies to /tmp.
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
{{- end }}
