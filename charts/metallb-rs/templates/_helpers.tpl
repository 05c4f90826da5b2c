{{/*
Names are the native manifest's (controller, speaker, metallb-system:*), not
prefixed with the release: the components look their objects up by these
names (the webhook Secret and Service, the memberlist Secret, the leases),
and the cluster-scoped ones exist once per cluster like the CRDs.
*/}}

{{/* Labels of one component's objects and pods: component in .component. */}}
{{- define "metallb-rs.labels" -}}
app: metallb
component: {{ .component }}
{{- end }}

{{/* The image of a component: .image is its override, .root the chart. */}}
{{- define "metallb-rs.image" -}}
{{- $repo := .image.repository | default .root.Values.image.repository -}}
{{- $tag := .image.tag | default .root.Values.image.tag | default (printf "v%s" .root.Chart.AppVersion) -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end }}

{{- define "metallb-rs.pullPolicy" -}}
{{- .image.pullPolicy | default .root.Values.image.pullPolicy -}}
{{- end }}

{{- define "metallb-rs.controller.serviceAccountName" -}}
{{- if .Values.controller.serviceAccount.create -}}
{{- .Values.controller.serviceAccount.name | default "controller" -}}
{{- else -}}
{{- .Values.controller.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end }}

{{- define "metallb-rs.speaker.serviceAccountName" -}}
{{- if .Values.speaker.serviceAccount.create -}}
{{- .Values.speaker.serviceAccount.name | default "speaker" -}}
{{- else -}}
{{- .Values.speaker.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end }}

{{/* The speakers' gossip key Secret (created by the controller). */}}
{{- define "metallb-rs.memberlistSecret" -}}memberlist{{- end }}

{{/* Where a metrics TLS Secret is mounted. */}}
{{- define "metallb-rs.metricsCertDir" -}}/etc/metallb-rs/metrics-tls{{- end }}

{{/* Flags both components take: log level, load balancer class, TLS. */}}
{{- define "metallb-rs.commonArgs" -}}
{{- $v := .root.Values -}}
{{- if $v.loadBalancerClass }}
- --lb-class
- {{ $v.loadBalancerClass | quote }}
{{- end }}
{{- if $v.tls.minVersion }}
- --tls-min-version
- {{ $v.tls.minVersion | quote }}
{{- end }}
{{- if $v.tls.cipherSuites }}
- --tls-cipher-suites
- {{ $v.tls.cipherSuites | quote }}
{{- end }}
{{- if $v.tls.curvePreferences }}
- --tls-curve-preferences
- {{ $v.tls.curvePreferences | quote }}
{{- end }}
{{- if .metricsSecret }}
- --metrics-cert-dir
- {{ include "metallb-rs.metricsCertDir" . }}
{{- end }}
- --log-level
- {{ .logLevel }}
{{- end }}

{{/* Liveness and readiness probes on the health port; .host for the speaker. */}}
{{- define "metallb-rs.probes" -}}
{{- if .values.livenessProbe.enabled }}
livenessProbe:
  failureThreshold: {{ .values.livenessProbe.failureThreshold }}
  httpGet:
    {{- if .host }}
    host: {{ .host }}
    {{- end }}
    path: /healthz
    port: health
  initialDelaySeconds: {{ .values.livenessProbe.initialDelaySeconds }}
  periodSeconds: {{ .values.livenessProbe.periodSeconds }}
{{- end }}
{{- if .values.readinessProbe.enabled }}
readinessProbe:
  failureThreshold: {{ .values.readinessProbe.failureThreshold }}
  httpGet:
    {{- if .host }}
    host: {{ .host }}
    {{- end }}
    path: /readyz
    port: health
  initialDelaySeconds: {{ .values.readinessProbe.initialDelaySeconds }}
  periodSeconds: {{ .values.readinessProbe.periodSeconds }}
{{- end }}
{{- end }}

{{/* Pod annotations: Prometheus' scrape hints and the user's. */}}
{{- define "metallb-rs.podAnnotations" -}}
{{- $a := dict -}}
{{- if .root.Values.prometheus.scrapeAnnotations -}}
{{- $_ := set $a "prometheus.io/scrape" "true" -}}
{{- $_ := set $a "prometheus.io/port" (toString .root.Values.prometheus.metricsPort) -}}
{{- $_ := set $a "prometheus.io/scheme" "https" -}}
{{- end -}}
{{- $a = merge (deepCopy .values.podAnnotations) $a -}}
{{- if $a }}
annotations:
  {{- toYaml $a | nindent 2 }}
{{- end }}
{{- end }}

{{/* The reader the scrapes authenticate as (prometheus.rbacPrometheus). */}}
{{- define "metallb-rs.metricsReader" -}}metallb-metrics-reader{{- end }}
{{- define "metallb-rs.metricsToken" -}}metallb-metrics-token{{- end }}
