//! The lazily read probe catalogue answers exactly as one that parses every format file up front:
//! the same probes in the same order, hence the same framework probe ids, with the same argument
//! types and attach data; and it reads only the formats it is asked about.

mod common;

use common::kernel_ok;
use dtrace_dif::program::ProbeDesc as DifProbeDesc;
use dtrace_framework::{Framework, Options};
use dtrace_linux::{Catalog, LinuxTracing, ProbeDesc, SessionOptions};

/// Every probe the framework lists over `cat`, with its id, name and typed arguments (as
/// `dtrace -lv` prints them).
fn framework_listing(cat: Catalog) -> Vec<String> {
    let linux = LinuxTracing::new(cat, SessionOptions::default());
    let mut fw = Framework::new(Options::default(), 1);
    linux.register(&mut fw).unwrap();
    let mut out = Vec::new();
    for p in fw.list_probes(&DifProbeDesc::default()) {
        let mut line = format!(
            "{} {}:{}:{}:{}",
            p.id, p.provider, p.module, p.function, p.name
        );
        for i in 0.. {
            let Some(a) = fw.arg_desc(p.id, i) else {
                break;
            };
            line += &format!(" [{} {:?} {}]", a.native, a.xlate, a.mapping);
        }
        out.push(line);
    }
    out
}

#[test]
fn lazy_catalogue_answers_as_the_eager_one() {
    if !kernel_ok("lazy_catalogue_answers_as_the_eager_one") {
        return;
    }
    let lazy = Catalog::load().unwrap();
    let eager = Catalog::load_eager_from(lazy.root()).unwrap();
    // Listing reads no format beyond the proc/sched ones.
    assert!(
        lazy.formats_read() <= 16,
        "{} formats read to list the catalogue",
        lazy.formats_read()
    );
    assert!(eager.formats_read() > 100);
    let names: Vec<&ProbeDesc> = lazy.descs().collect();
    let eager_names: Vec<&ProbeDesc> = eager.descs().collect();
    assert_eq!(names, eager_names);
    assert!(names.len() > 100);

    // One probe: only its own formats are read.
    let before = lazy.formats_read();
    let read = lazy
        .matching(&ProbeDesc::parse("syscall::read:entry"))
        .unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(
        Some(&read[0]),
        eager
            .get(&ProbeDesc::parse("syscall:vmlinux:read:entry"))
            .as_ref()
    );
    assert!(lazy.formats_read() - before <= 2);

    // Every probe, built: same arguments, types and attach data.
    assert_eq!(lazy.probes(), eager.probes());
    for d in eager.descs() {
        assert_eq!(lazy.get(d), eager.get(d), "{d}");
    }
}

#[test]
fn lazy_catalogue_gives_the_framework_the_same_ids_and_types() {
    if !kernel_ok("lazy_catalogue_gives_the_framework_the_same_ids_and_types") {
        return;
    }
    let lazy = Catalog::load().unwrap();
    let eager = Catalog::load_eager_from(lazy.root()).unwrap();
    let a = framework_listing(lazy);
    let b = framework_listing(eager);
    assert!(a.len() > 100);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y);
    }
    assert_eq!(a.len(), b.len());
}

#[test]
fn unknown_probes_are_still_unknown() {
    if !kernel_ok("unknown_probes_are_still_unknown") {
        return;
    }
    let cat = Catalog::load().unwrap();
    assert!(cat
        .get(&ProbeDesc::parse("sdt:nosuchsys::nosuchevent"))
        .is_none());
    assert!(cat
        .matching(&ProbeDesc::parse("syscall::no_such_call:entry"))
        .is_err());
    assert!(cat
        .get(&ProbeDesc::parse("profile:::profile-1234"))
        .is_some());
}

/// The names a probe's kernel code has as constants (`Probe::names`) are those the framework
/// lists it by, so the provider builds them from the catalogue's probe alone.
#[test]
fn each_listed_probe_has_the_names_the_framework_lists() {
    if !kernel_ok("each_listed_probe_has_the_names_the_framework_lists") {
        return;
    }
    let cat = Catalog::load().unwrap();
    let linux = LinuxTracing::new(Catalog::load_from(cat.root()).unwrap(), Default::default());
    let mut fw = Framework::new(Options::default(), 1);
    linux.register(&mut fw).unwrap();
    let mut checked = 0;
    for p in fw.list_probes(&DifProbeDesc::default()) {
        let desc = ProbeDesc::new(&p.provider, &p.module, &p.function, &p.name);
        let Some(probe) = cat.get(&desc) else {
            continue;
        };
        let n = probe.names_as(p.id);
        assert_eq!(
            [&n.provider, &n.module, &n.function, &n.name],
            [&p.provider, &p.module, &p.function, &p.name]
        );
        assert_eq!(n.id, dtrace_ebpf::translate::ProbeId::Is(p.id));
        checked += 1;
    }
    assert!(checked > 100, "{checked} probes checked");
}
