//! A small tracer over the library, for trying probes by hand and for the teardown tests:
//! `capture [-p prefix] [-s] [-u|-B] [-t seconds] probe-description [-- command args]`
//! (`-B`: user stacks by build-id, resolvable after the process exits)
//! prints `CPU ID FUNCTION:NAME`-style lines with pid and execname (and stacks with -s/-u), and exits
//! on SIGINT/SIGTERM, when the command exits, or after the time limit, detaching everything.

use dtrace_linux::capture::CaptureSpec;
use dtrace_linux::symbols::Symbolizer;
use dtrace_linux::{signals, Catalog, ProbeDesc, Session, SessionOptions};

fn main() {
    if let Err(e) = run() {
        eprintln!("capture: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut prefix = "dtcap".to_string();
    let (mut kstack, mut ustack, mut seconds) = (false, false, 0u64);
    let mut build_id = false;
    let cmd = args
        .iter()
        .position(|a| a == "--")
        .map(|i| args.split_off(i))
        .map(|mut v| v.split_off(1));
    let mut it = args.into_iter();
    let mut desc = None;
    while let Some(a) = it.next() {
        match a.as_str() {
            "-p" => prefix = it.next().ok_or("-p needs a prefix")?,
            "-s" => kstack = true,
            "-u" => ustack = true,
            "-B" => {
                ustack = true;
                build_id = true;
            }
            "-t" => seconds = it.next().ok_or("-t needs seconds")?.parse()?,
            _ => desc = Some(a),
        }
    }
    let desc = desc.ok_or("usage: capture [-p prefix] [-s] [-u] [-t secs] probe [-- cmd args]")?;
    signals::install()?;
    let cat = Catalog::load()?;
    let probes = cat.matching(&ProbeDesc::parse(&desc))?;
    let mut s = Session::new(SessionOptions {
        name_prefix: prefix,
        ..Default::default()
    })?;
    let mut child = match &cmd {
        Some(argv) => Some(dtrace_linux::process::spawn_held(argv)?),
        None => None,
    };
    let spec = CaptureSpec {
        kstack: kstack.then_some(16),
        ustack: ustack.then_some(16),
        ustack_build_id: build_id,
        filter_pid: child.as_ref().map(|c| c.pid()),
        ..CaptureSpec::new()
    };
    for (i, p) in probes.iter().enumerate() {
        s.enable(p, i as u32 + 1, &spec)?;
    }
    eprintln!("capture: matched {} probes", probes.len());
    if let Some(c) = child.as_mut() {
        c.release()?;
    }
    let start = std::time::Instant::now();
    let mut sym = Symbolizer::new();
    println!("{:>3} {:>6} {:>32}", "CPU", "ID", "FUNCTION:NAME");
    loop {
        let mut evs = Vec::new();
        s.poll(100, &mut |e| evs.push(e))?;
        for e in evs {
            let p = &probes[(e.tag - 1) as usize].desc;
            println!(
                "{:>3} {:>6} {:>32} pid {} {}",
                e.cpu,
                e.tag,
                format!("{}:{}", p.function, p.name),
                e.pid,
                e.execname()
            );
            for pc in e.kstack.iter().flatten().flatten() {
                println!("              {}", sym.kernel_frame(*pc));
            }
            for pc in e.ustack.iter().flatten().flatten() {
                println!("              {}", sym.user_frame(e.pid, *pc));
            }
            for f in e.ustack_files.iter().flatten().flatten() {
                println!("              {}", sym.user_file_frame(e.pid, f));
            }
        }
        if signals::received().is_some() || (seconds > 0 && start.elapsed().as_secs() >= seconds) {
            break;
        }
        if let Some(c) = child.as_mut() {
            if c.try_wait()?.is_some() {
                break;
            }
        }
    }
    eprintln!("capture: {} drops", s.drops()?);
    Ok(())
}
