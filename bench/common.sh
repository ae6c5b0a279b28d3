# Sourced by the benchmark scripts after they set BENCH (their name, for
# messages) and cd to the workspace: argument checks, the release build, and
# the small probes every lab benchmark needs.

die() { echo "$BENCH: $*" >&2; exit 1; }
# name value: a whole number >= 1, or die naming it.
num() { [[ $2 =~ ^[0-9]+$ && $2 -ge 1 ]] || die "$1 must be a whole number >= 1 (got '$2')"; }

# Builds tunbench (release) and sets TB to its absolute path.
build_tunbench() {
    echo "building tunbench (release) ..." >&2
    cargo build --release -q --bin tunbench >&2
    TB=${CARGO_TARGET_DIR:-target}/release/tunbench
    [[ $TB == /* ]] || TB=$(pwd)/$TB
    [[ -x $TB ]] || die "no binary at $TB"
}

# pid -> utime+stime in clock ticks, or nothing when the process is gone.
proc_ticks() { sed 's/.*) //' /proc/"$1"/stat 2>/dev/null | awk '{print $12 + $13}'; }

# Whether something listens on TCP port PORT in namespace LAB-b.
listening() { [[ -n $(ip netns exec "$LAB-b" ss -Hltn "sport = :$PORT" 2>/dev/null) ]]; }

# The wall clock in seconds with microseconds, for timing a step.
now() { echo "$EPOCHREALTIME"; }
