//! `ctfdump`: prints a CTF container (a raw CTF file, or the `.SUNW_ctf`/`.ctf` section of an ELF
//! file) in human-readable form: header, labels, data objects, functions, types with members, sizes
//! and offsets.

use std::process::ExitCode;

use dtrace_ctf::dump::{dump, DumpOptions};

fn usage() -> ExitCode {
    eprintln!("usage: ctfdump [-h] [-t] [-s] [-S] file");
    eprintln!(
        "  -h  header only   -t  types only   -s  sections (labels, objects, functions) only"
    );
    eprintln!("  -S  statistics only");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut opts = DumpOptions {
        header: false,
        sections: false,
        types: false,
    };
    let mut stats = false;
    let mut file = None;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "-h" => opts.header = true,
            "-t" => opts.types = true,
            "-s" => opts.sections = true,
            "-S" => stats = true,
            s if s.starts_with('-') => return usage(),
            s => {
                if file.replace(s.to_string()).is_some() {
                    return usage();
                }
            }
        }
    }
    let Some(file) = file else { return usage() };
    if !opts.header && !opts.sections && !opts.types && !stats {
        opts = DumpOptions::default();
    }
    let bytes = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ctfdump: {file}: {e}");
            return ExitCode::from(1);
        }
    };
    let ctf = match dtrace_ctf::elf_ctf_section(&bytes) {
        Ok(Some(sec)) => sec,
        Ok(None) => bytes,
        Err(e) => {
            eprintln!("ctfdump: {file}: {e}");
            return ExitCode::from(1);
        }
    };
    let header = match dtrace_ctf::read_header(&ctf) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("ctfdump: {file}: {e}");
            return ExitCode::from(1);
        }
    };
    let c = match dtrace_ctf::read_ctf(&ctf) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ctfdump: {file}: {e}");
            return ExitCode::from(1);
        }
    };
    let out = dump(&c, Some(&header), opts);
    print!("{out}");
    if stats {
        println!(
            "- Statistics -----------------------------------------------------------------\n"
        );
        println!("  total number of types   = {}", c.len());
        println!("  total number of objects = {}", c.objects.len());
        println!("  total number of funcs   = {}", c.functions.len());
        println!("  string table length     = {}", header.strlen);
        println!("  container size          = {}", ctf.len());
    }
    ExitCode::SUCCESS
}
