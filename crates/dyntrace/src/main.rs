//! The `dyntrace` binary: see `dtrace_dyntrace::cli`.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(dtrace_dyntrace::cli::main_with(&args));
}
