//! The `tunbench` command: parse, run, map the result to an exit code. No logic here.

fn main() {
    std::process::exit(tunbench::commands::main());
}
