{{/* The release's full name: the release name, with the chart's unless it holds it already. */}}
{{- define "runplane.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "runplane.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "runplane.labels" -}}
{{ include "runplane.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "runplane.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "runplane.fullname" .) -}}
{{- end -}}

{{/* Where runs' pods go. */}}
{{- define "runplane.runsNamespace" -}}
{{- .Values.runs.namespace | default .Release.Namespace -}}
{{- end -}}

{{- define "runplane.instance" -}}
{{- .Values.runs.instance | default .Release.Name -}}
{{- end -}}

{{- define "runplane.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "runplane.tokensSecret" -}}
{{- .Values.tokens.existingSecret | default (printf "%s-tokens" (include "runplane.fullname" .)) -}}
{{- end -}}

{{- define "runplane.databaseSecret" -}}
{{- if and (not .Values.postgresql.enabled) .Values.externalDatabase.existingSecret -}}
{{- .Values.externalDatabase.existingSecret -}}
{{- else -}}
{{- printf "%s-database" (include "runplane.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "runplane.databaseKey" -}}
{{- if and (not .Values.postgresql.enabled) .Values.externalDatabase.existingSecret -}}
{{- .Values.externalDatabase.key -}}
{{- else -}}
url
{{- end -}}
{{- end -}}

{{- define "runplane.postgresqlName" -}}
{{- printf "%s-postgresql" (include "runplane.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The service pods' priority class: the value, else the first system class the chart makes. */}}
{{- define "runplane.priorityClassName" -}}
{{- if .Values.priorityClassName -}}
{{- .Values.priorityClassName -}}
{{- else if and .Values.priorityClasses.create .Values.priorityClasses.system -}}
{{- first .Values.priorityClasses.system -}}
{{- end -}}
{{- end -}}

{{/* Combinations of values that cannot work, refused with what to change. */}}
{{- define "runplane.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "replicas: %v replicas need leaderElection.enabled=true (one of them watches and launches runs); set replicas=1 or enable leader election" .Values.replicas) -}}
{{- end -}}
{{- $external := or .Values.externalDatabase.url .Values.externalDatabase.existingSecret -}}
{{- if and .Values.postgresql.enabled $external -}}
{{- fail "externalDatabase: an external database is set while postgresql.enabled=true; set postgresql.enabled=false to use the external one, or unset externalDatabase" -}}
{{- end -}}
{{- if and (not .Values.postgresql.enabled) (not $external) -}}
{{- fail "externalDatabase: with postgresql.enabled=false the service needs externalDatabase.url or externalDatabase.existingSecret (example: --set externalDatabase.url=postgresql+psycopg://runplane:secret@db.example:5432/runplane)" -}}
{{- end -}}
{{- if and (not .Values.tokens.existingSecret) (not .Values.tokens.list) (not .Values.tokens.generatedAdmin.enabled) -}}
{{- fail "tokens: nobody could use the API; set tokens.list, tokens.existingSecret or tokens.generatedAdmin.enabled=true" -}}
{{- end -}}
{{- range .Values.tokens.list -}}
{{- if or (not .token) (lt (len (toString .token)) 16) (not .user) -}}
{{- fail "tokens.list: every token has a user and a token of at least 16 characters (generate one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')" -}}
{{- end -}}
{{- end -}}
{{- if not (has .Values.service.type (list "ClusterIP" "NodePort" "LoadBalancer")) -}}
{{- fail (printf "service.type: %q is not ClusterIP, NodePort or LoadBalancer (an Ingress: ingress.enabled=true)" .Values.service.type) -}}
{{- end -}}
{{- if ge (int .Values.preStopSleepSeconds) (int .Values.terminationGracePeriodSeconds) -}}
{{- fail (printf "preStopSleepSeconds: %v leaves nothing of terminationGracePeriodSeconds (%v) for runplane serve to stop in; keep it well below (example: 5 of 45)" .Values.preStopSleepSeconds .Values.terminationGracePeriodSeconds) -}}
{{- end -}}
{{- if or (not .Values.resources.cpu) (not .Values.resources.memory) -}}
{{- fail "resources: the service needs resources.cpu and resources.memory (its requests and limits both, example: cpu: \"1\", memory: 1Gi)" -}}
{{- end -}}
{{- end -}}

{{/* The service's configuration file: the values' config, with what the chart decides on top. */}}
{{- define "runplane.config" -}}
{{- $service := dict "runtime" "kubernetes" "instance" (include "runplane.instance" .) "host" "0.0.0.0" "port" 8470 -}}
{{- if .Values.leaderElection.enabled -}}
{{- $_ := set $service "leader_election" (dict "enabled" true "lease_name" .Values.leaderElection.leaseName) -}}
{{- end -}}
{{- with .Values.trustedProxies -}}
{{- $_ := set $service "trusted_proxies" . -}}
{{- end -}}
{{- $classes := dict "valid" .Values.priorityClasses.valid "system" .Values.priorityClasses.system "values" .Values.priorityClasses.values "allowed_roles" .Values.priorityClasses.allowedRoles -}}
{{- $chart := dict "namespace" (include "runplane.runsNamespace" .) "service" $service "priority_classes" $classes "preemptible_nodes_preset" .Values.spot.preset -}}
{{- if .Values.spot.nodes -}}
{{- $_ := set $chart "preemptible_nodes" .Values.spot.nodes -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite (deepCopy (.Values.config | default dict)) $chart) -}}
{{- end -}}
