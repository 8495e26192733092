//! `dofdump`: prints a DOF file, or the `.SUNW_dof` sections of an ELF file, in human-readable form.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file] = args.as_slice() else {
        eprintln!("usage: dofdump file   (a DOF file, or an ELF file with .SUNW_dof sections)");
        return ExitCode::from(2);
    };
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("dofdump: {file}: {e}");
            return ExitCode::from(1);
        }
    };
    let dofs = match dtrace_dof::dof_sections_from_elf(&bytes) {
        Ok(Some(v)) if v.is_empty() => {
            eprintln!("dofdump: {file}: no .SUNW_dof section");
            return ExitCode::from(1);
        }
        Ok(Some(v)) => v,
        Ok(None) => vec![bytes],
        Err(e) => {
            eprintln!("dofdump: {file}: {e}");
            return ExitCode::from(1);
        }
    };
    let mut status = ExitCode::SUCCESS;
    for (i, d) in dofs.iter().enumerate() {
        if dofs.len() > 1 {
            println!("== .SUNW_dof #{i} ==");
        }
        match dtrace_dof::read_dof(d) {
            Ok(f) => print!("{}", dtrace_dof::dump::dump(&f)),
            Err(e) => {
                eprintln!("dofdump: {file}: {e}");
                status = ExitCode::from(1);
            }
        }
    }
    status
}
