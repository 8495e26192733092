//! Compiles a D script given on the command line (file or `-n` string) and prints its `-S` listing.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (src, kind, name) = if args.get(1).map(String::as_str) == Some("-n") {
        (
            args[2].clone(),
            dtrace_compiler::SourceKind::String,
            args[2].clone(),
        )
    } else {
        let p = args.get(1).cloned().unwrap_or_default();
        (
            std::fs::read_to_string(&p).unwrap_or_default(),
            dtrace_compiler::SourceKind::File,
            p,
        )
    };
    let opts = dtrace_compiler::CompileOptions {
        source: kind,
        ..Default::default()
    };
    match dtrace_compiler::compile(&src, &opts) {
        Ok(p) => print!("{}", dtrace_compiler::listing(&p)),
        Err(e) => {
            let m = if kind == dtrace_compiler::SourceKind::File {
                e.render_script(&name, true)
            } else {
                e.render_specifier(&name, true)
            };
            eprintln!("dtrace: {m}");
            std::process::exit(1);
        }
    }
}
