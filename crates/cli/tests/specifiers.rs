//! Probe specifiers on the command line as DTrace for Linux reads them: a leading number is a probe
//! identifier for `-i` and `-n` alike, descriptions fill from the field their option names and more
//! fields are an error, and the messages of each failure.

mod common;

fn dtrace(args: &[&str]) -> (i32, String, String) {
    common::dtrace_plain(&[], args)
}

fn fails(args: &[&str], msg: &str) {
    let (rc, out, err) = dtrace(args);
    assert_eq!((rc, out.as_str(), err.as_str()), (1, "", msg), "{args:?}");
}

#[test]
fn a_leading_number_is_a_probe_identifier() {
    // dtrace:::BEGIN is probe 1.
    for opt in ["-i", "-n"] {
        let (rc, out, err) = dtrace(&["-q", opt, "1 { trace(5); exit(0); }"]);
        assert_eq!((rc, out.as_str(), err.as_str()), (0, "5\n", ""), "{opt}");
    }
    fails(
        &["-i", "0"],
        "dtrace: invalid probe specifier 0: invalid probe identifier 0: Unknown probe identifier\n",
    );
    fails(
        &["-i", "0-2"],
        "dtrace: invalid probe specifier 0-2: invalid probe identifier 0: Unknown probe identifier\n",
    );
    // What goes on after the number is a further description.
    fails(
        &["-i", "1-2"],
        "dtrace: invalid probe specifier 1-2: probe description :::-2 does not match any probes\n",
    );
    fails(
        &["-f", "4.56"],
        "dtrace: invalid probe specifier 4.56: probe identifier 4 not permitted when specifying functions\n",
    );
}

#[test]
fn other_identifiers_are_probe_names() {
    fails(
        &["-i", "i23"],
        "dtrace: invalid probe specifier i23: probe description :::i23 does not match any probes\n",
    );
    fails(
        &["-i", "-3"],
        "dtrace: invalid probe specifier -3: probe description :::-3 does not match any probes\n",
    );
}

#[test]
fn overspecified_descriptions() {
    fails(
        &["-m", "genunix::"],
        "dtrace: invalid probe specifier genunix::: invalid probe description \"genunix::\": Overspecified probe description\n",
    );
    fails(
        &["-lP", "dtrace:::BEGIN"],
        "dtrace: invalid probe specifier dtrace:::BEGIN: invalid probe description \"dtrace:::BEGIN\": Overspecified probe description\n",
    );
    // Fields are taken from the right, so an empty one left of the provider is no extra text.
    fails(
        &["-f", ":nosuchmod::"],
        "dtrace: invalid probe specifier :nosuchmod::: probe description nosuchmod::: does not match any probes\n",
    );
}

#[test]
fn unreferenced_macro_arguments() {
    fails(
        &["-i", "1", "10"],
        "dtrace: invalid probe specifier 1: extraneous argument '10' ($1 is not referenced)\n",
    );
    fails(
        &["-n", "BEGIN", "{exit(0);}"],
        "dtrace: invalid probe specifier BEGIN: extraneous argument '{exit(0);}' ($1 is not referenced)\n",
    );
}

#[test]
fn listing_by_identifier() {
    let (rc, out, err) = dtrace(&["-li", "2"]);
    assert_eq!((rc, err.as_str()), (0, ""));
    assert_eq!(
        out,
        format!(
            "{:>5} {:>10} {:>17} {:>33} NAME\n{:>5} {:>10} {:>17} {:>33} END\n",
            "ID", "PROVIDER", "MODULE", "FUNCTION", 2, "dtrace", "", ""
        )
    );
    let (rc, _, err) = dtrace(&["-li", "-3"]);
    assert_eq!(
        (rc, err.as_str()),
        (
            0,
            "dtrace: failed to match :::-3: No probe matches description\n"
        )
    );
}
