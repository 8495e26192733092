//! `ctfconvert`: converts type information into a CTF container file. The input is a BTF file (such
//! as `/sys/kernel/btf/vmlinux`; module BTF with `-b base`) or an ELF file with DWARF.

use std::process::ExitCode;
use std::sync::Arc;

use dtrace_ctf::{btf_to_ctf, btf_to_ctf_child, dwarf_to_ctf_from_elf, write_ctf, WriteOptions};

fn usage() -> ExitCode {
    eprintln!("usage: ctfconvert [-z] [-V 2|3] [-b base-btf] [-p parent-name] input -o output");
    eprintln!("  input is BTF (e.g. /sys/kernel/btf/vmlinux) or an ELF file with DWARF");
    eprintln!("  -z  compress   -V  force CTF version   -b  base BTF for split (module) BTF");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = WriteOptions::default();
    let (mut input, mut output, mut base, mut parent_name) =
        (None, None, None, String::from("vmlinux"));
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut val = || {
            i += 1;
            args.get(i).cloned()
        };
        match a {
            "-o" => output = val(),
            "-b" => base = val(),
            "-p" => match val() {
                Some(p) => parent_name = p,
                None => return usage(),
            },
            "-z" => opts.compress = true,
            "-V" => match val().as_deref() {
                Some("2") => opts.version = Some(2),
                Some("3") => opts.version = Some(3),
                _ => return usage(),
            },
            s if s.starts_with('-') => return usage(),
            s => {
                if input.replace(s.to_string()).is_some() {
                    return usage();
                }
            }
        }
        i += 1;
    }
    let (Some(input), Some(output)) = (input, output) else {
        return usage();
    };
    let read = |p: &str| std::fs::read(p).map_err(|e| format!("{p}: {e}"));
    let result = (|| -> Result<Vec<u8>, String> {
        let bytes = read(&input)?;
        let c = if bytes.starts_with(&[0x9f, 0xeb]) {
            match &base {
                None => btf_to_ctf(&bytes).map_err(|e| format!("{input}: {e}"))?,
                Some(b) => {
                    let base_bytes = read(b)?;
                    let parent =
                        Arc::new(btf_to_ctf(&base_bytes).map_err(|e| format!("{b}: {e}"))?);
                    btf_to_ctf_child(&bytes, &base_bytes, parent, &parent_name)
                        .map_err(|e| format!("{input}: {e}"))?
                }
            }
        } else if bytes.starts_with(b"\x7fELF") {
            dwarf_to_ctf_from_elf(&bytes).map_err(|e| format!("{input}: {e}"))?
        } else {
            return Err(format!("{input}: neither BTF nor ELF"));
        };
        write_ctf(&c, opts).map_err(|e| format!("{input}: {e}"))
    })();
    match result {
        Ok(out) => match std::fs::write(&output, out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ctfconvert: {output}: {e}");
                ExitCode::from(1)
            }
        },
        Err(e) => {
            eprintln!("ctfconvert: {e}");
            ExitCode::from(1)
        }
    }
}
