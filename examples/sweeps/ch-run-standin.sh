#!/bin/bash
# A stand-in for Charliecloud's ch-run, so the --wrap example runs on any
# machine: `ch-run --set-env=FILE IMAGE -- CMD…` sets the variables of FILE
# (KEY=VALUE lines) and runs CMD; the real one also enters the image.
set -euo pipefail
while [ $# -gt 0 ]; do
	case $1 in
	--set-env=*)
		while IFS='=' read -r key value; do
			[ -n "$key" ] && [ "${key#\#}" = "$key" ] && export "$key=$value"
		done <"${1#--set-env=}"
		shift ;;
	--) shift; break ;;
	-*) echo "ch-run-standin: unknown option $1" >&2; exit 64 ;;
	*) export CH_RUNNING_IMAGE=$1; shift ;;
	esac
done
exec "$@"
