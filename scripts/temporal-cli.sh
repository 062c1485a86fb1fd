#!/usr/bin/env bash
# temporal-cli.sh: drive keel sessions with nothing but the `temporal` CLI.
#
# keel's workflows speak plain JSON on Temporal (docs/cli.md, "Without
# keel: the `temporal` CLI"), so an operator without `keel` can inspect and
# control sessions with the stock Temporal CLI. This script is a cheat sheet that
# runs: it prints each `temporal` command (on stderr, prefixed with "+")
# before running it, so you can copy it, and --dry-run only prints.
#
# What it sends, on the wire (everything goes to the session's workflow,
# ID = session ID, whose current execution runs the active run; --run N
# names run N, ID SESSION/run-N, in the input so the session drops a
# command for a run that is no longer active; every --input is one
# json/plain payload):
#   state    query   "state"    (the active run's state is its "run")
#   events   query   "events"   {"after": SEQ, "limit": N}
#   history  query   "history"  {"offset": N, "limit": N}
#   steer    signal  "steer"    {"text": TEXT, "run_id": RUN}
#   respond  signal  "respond"  {"request_id": ID, "answer": JSON, "run_id": RUN}
#   cancel   signal  "cancel"   (no input: the active run) or {"run_id": RUN}
#
# Signals cannot answer: a steer or an answer the run refuses (it has
# ended, the request ID is unknown, the answer does not match the schema)
# is logged by the worker and changes nothing. Check with `state SESSION`
# (open requests, staged steering), or use `keel steer` / `keel respond`,
# which use updates and report errors.
#
# Install the CLI: https://docs.temporal.io/cli (brew install temporal, or
# curl -sSf https://temporal.download/cli.sh | sh). KEEL_TEMPORAL_CLI names
# another binary (the tests use a stand-in). TEMPORAL_ADDRESS and
# TEMPORAL_NAMESPACE set the defaults of --address and --namespace.
#
# Examples (after `keel dev` and `keel send --session demo "hi"`):
#   scripts/temporal-cli.sh state demo
#   scripts/temporal-cli.sh state demo                # open requests are in its run
#   scripts/temporal-cli.sh steer demo --run 1 "Focus on the tests."
#   scripts/temporal-cli.sh respond demo --run 1 call_1/ask_user '"yes"'
#   scripts/temporal-cli.sh respond demo --run 1 call_2/approval '{"approved": true}'
#   scripts/temporal-cli.sh cancel demo
#   scripts/temporal-cli.sh events demo --after 10
set -euo pipefail

prog=${0##*/}

usage() {
	cat <<EOF
Usage: $prog [--address HOST:PORT] [--namespace NS] [--dry-run] COMMAND SESSION [ARGS]

Commands:
  state   SESSION                                query the session's state (and its active run's)
  events  SESSION [--after SEQ] [--limit N]      query durable events after SEQ
  history SESSION [--offset N] [--limit N]       query the transcript
  steer   SESSION --run N TEXT                   signal steering to run N
  respond SESSION --run N REQUEST_ID ANSWER [--string]
                                                 signal an answer (JSON; --string sends ANSWER as a JSON string)
  cancel  SESSION [--run N]                      signal cancel to the active run (or run N)

Options:
  --address HOST:PORT   Temporal frontend (default \$TEMPORAL_ADDRESS or localhost:7233)
  --namespace NS        Temporal namespace (default \$TEMPORAL_NAMESPACE or default)
  --dry-run             print the temporal commands without running them
EOF
}

die() {
	printf '%s: %s\n' "$prog" "$*" >&2
	exit 64
}

# json_string prints $1 as a JSON string. Newlines, tabs and carriage
# returns are escaped; other control characters are refused rather than
# half-escaped.
json_string() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	s=${s//$'\r'/\\r}
	s=${s//$'\t'/\\t}
	if [[ $s =~ [[:cntrl:]] ]]; then
		die "text with control characters other than newline and tab: use keel steer / keel respond"
	fi
	printf '"%s"' "$s"
}

number() { # number NAME VALUE: VALUE in decimal, without leading zeros
	[[ $2 =~ ^[0-9]{1,9}$ ]] || die "$1 wants a number, got '$2'"
	printf '%s' "$((10#$2))"
}

address=${TEMPORAL_ADDRESS:-localhost:7233}
namespace=${TEMPORAL_NAMESPACE:-default}
dry_run=0
run_n="" after="" offset="" limit="" as_string=0
cmd="" session=""
args=()

while (($#)); do
	case $1 in
	-h | --help) usage; exit 0 ;;
	--address) address=${2:?--address wants HOST:PORT}; shift ;;
	--namespace) namespace=${2:?--namespace wants a name}; shift ;;
	--dry-run) dry_run=1 ;;
	--run) run_n=$(number --run "${2:-}"); shift ;;
	--after) after=$(number --after "${2:-}"); shift ;;
	--offset) offset=$(number --offset "${2:-}"); shift ;;
	--limit) limit=$(number --limit "${2:-}"); shift ;;
	--string) as_string=1 ;;
	--) shift; args+=("$@"); break ;;
	-*) die "unknown option $1 (see --help)" ;;
	*)
		if [[ -z $cmd ]]; then cmd=$1
		elif [[ -z $session ]]; then session=$1
		else args+=("$1")
		fi
		;;
	esac
	shift
done

[[ -n $cmd ]] || { usage >&2; exit 64; }
[[ -n $session ]] || die "$cmd: missing SESSION"

# Every command goes to the session; --run N names the run in its input.
target=$session
run_field=""
if [[ -n $run_n ]]; then
	((run_n > 0)) || die "--run counts from 1"
	run_field=",\"run_id\":$(json_string "$session/run-$run_n")"
fi

want_args() { # want_args N
	((${#args[@]} == $1)) || die "$cmd: want $1 argument(s) after SESSION, got ${#args[@]} (see --help)"
}

need_run() {
	[[ -n $run_n ]] || die "$cmd: signal a run: --run N (\`$prog state $session\` shows active_run.number)"
}

no_run() {
	[[ -z $run_n ]] || die "$cmd: the session answers for its runs; drop --run"
}

temporal_cli=${KEEL_TEMPORAL_CLI:-temporal}

# shell_quote prints $1 so a shell reads it back as is: bare when it is
# plain, else in single quotes (JSON reads best that way).
shell_quote() {
	if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
		printf '%s' "$1"
	else
		printf "'%s'" "${1//\'/\'\\\'\'}"
	fi
}

# run prints the command, then runs it unless --dry-run.
run() {
	local a line="+ temporal"
	for a in "$@"; do
		line+=" $(shell_quote "$a")"
	done
	printf '%s\n' "$line" >&2
	((dry_run)) && return 0
	if ! command -v "$temporal_cli" >/dev/null 2>&1; then
		printf '%s: the temporal CLI is not installed (https://docs.temporal.io/cli); --dry-run prints the commands\n' "$prog" >&2
		exit 127
	fi
	"$temporal_cli" "$@"
}

conn=(--address "$address" --namespace "$namespace")

case $cmd in
state)
	no_run
	want_args 0
	run workflow query "${conn[@]}" --workflow-id "$target" --type state
	;;
events)
	no_run
	want_args 0
	input="{\"after\":${after:-0}"
	[[ -n $limit ]] && input+=",\"limit\":$limit"
	input+="}"
	run workflow query "${conn[@]}" --workflow-id "$target" --type events --input "$input"
	;;
history)
	no_run
	want_args 0
	input="{\"offset\":${offset:-0}"
	[[ -n $limit ]] && input+=",\"limit\":$limit"
	input+="}"
	run workflow query "${conn[@]}" --workflow-id "$target" --type history --input "$input"
	;;
steer)
	need_run
	want_args 1
	text=$(json_string "${args[0]}")
	run workflow signal "${conn[@]}" --workflow-id "$target" --name steer --input "{\"text\":$text$run_field}"
	;;
respond)
	need_run
	want_args 2
	id=$(json_string "${args[0]}")
	answer=${args[1]}
	if ((as_string)); then
		answer=$(json_string "$answer")
	fi
	run workflow signal "${conn[@]}" --workflow-id "$target" --name respond --input "{\"request_id\":$id,\"answer\":$answer$run_field}"
	;;
cancel)
	want_args 0
	if [[ -n $run_n ]]; then
		run workflow signal "${conn[@]}" --workflow-id "$target" --name cancel --input "{${run_field#,}}"
	else
		run workflow signal "${conn[@]}" --workflow-id "$target" --name cancel
	fi
	;;
*)
	die "unknown command $cmd (see --help)"
	;;
esac
