//! tracefs listing and format reading as the probe catalogue uses them: the events listed from
//! the directory entries' types are exactly those with a `format` file, and each format read in
//! one go parses to what the whole file's text parses to. Skipped where tracefs is not mounted.

use dtrace_linux::tracefs::{find_tracefs, list_events, parse_format, read_format};

#[test]
fn listed_events_are_those_with_a_format_file() {
    let Some(root) = find_tracefs() else {
        eprintln!("skipped: tracefs is not mounted");
        return;
    };
    let listed = list_events(&root).unwrap();
    let mut with_format = Vec::new();
    for sys in std::fs::read_dir(root.join("events")).unwrap().flatten() {
        let Ok(evs) = std::fs::read_dir(sys.path()) else {
            continue;
        };
        for ev in evs.flatten() {
            if ev.path().join("format").is_file() {
                with_format.push((
                    sys.file_name().to_string_lossy().into_owned(),
                    ev.file_name().to_string_lossy().into_owned(),
                ));
            }
        }
    }
    with_format.sort();
    assert_eq!(listed, with_format);
    assert!(
        listed
            .iter()
            .any(|(s, e)| s == "syscalls" && e == "sys_enter_read")
            || listed.len() < 100
    );
}

#[test]
fn formats_read_in_one_go_parse_as_the_whole_text() {
    let Some(root) = find_tracefs() else {
        eprintln!("skipped: tracefs is not mounted");
        return;
    };
    let mut n = 0;
    for (sys, ev) in list_events(&root).unwrap() {
        let p = root.join("events").join(&sys).join(&ev).join("format");
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        let whole = parse_format(&text, &p.display().to_string()).unwrap();
        assert_eq!(read_format(&root, &sys, &ev).unwrap(), whole, "{sys}:{ev}");
        n += 1;
    }
    assert!(n == 0 || n > 100, "only {n} formats read");
}

/// Every syscall this kernel traces has its number in the catalogue's table, so every syscall
/// probe is dispatched from `sys_enter`/`sys_exit` (a syscall without one attaches to its own
/// tracepoint, and each such detach waits out an RCU grace period: forty of them made
/// `dtrace -n 'syscall:::entry'` take two seconds more to exit on Linux 6.18).
#[cfg(target_arch = "x86_64")]
#[test]
fn every_traced_syscall_has_its_number() {
    let Some(root) = find_tracefs() else {
        eprintln!("skipped: tracefs is not mounted");
        return;
    };
    let events = list_events(&root).unwrap();
    let names = dtrace_linux::catalog::syscall::names(&events);
    let unnumbered: Vec<_> = names
        .iter()
        .filter(|n| dtrace_linux::catalog::syscall_nr::syscall_nr(n).is_none())
        .collect();
    assert!(
        unnumbered.is_empty(),
        "syscalls of this kernel missing from catalog/syscall_nr.rs: {unnumbered:?}"
    );
    assert!(names.is_empty() || names.len() > 100, "{names:?}");
}
