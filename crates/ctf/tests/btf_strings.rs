//! BTF string offsets: the parser takes a string section that is all UTF-8 as text once, and must
//! still accept and reject exactly the offsets it accepted byte by byte (the middle of a character,
//! past the end, a last string without its NUL), and still read a section that is not all UTF-8.

mod common;

use common::BtfBuilder;
use dtrace_ctf::*;

/// A blob of one `int` named by the string at `name_off`, over the string section `strings`.
fn int_named(strings: &[u8], name_off: u32) -> Vec<u8> {
    let mut b = BtfBuilder::new();
    b.strings = strings.to_vec();
    let info = 1u32 << 24;
    for w in [name_off, info, 4, (1 << 24) | 32] {
        b.types.extend_from_slice(&w.to_le_bytes());
    }
    b.finish()
}

/// Whether the conversion refuses the name at `name_off` as a bad string offset.
fn bad_string(strings: &[u8], name_off: u32) -> bool {
    matches!(btf_to_ctf(&int_named(strings, name_off)), Err(CtfError::BadString(o)) if o == name_off)
}

fn name_of_int(blob: &[u8]) -> Result<String> {
    let c = btf_to_ctf(blob)?;
    let (_, t) = c.iter().next().ok_or(CtfError::NoSuchType(1))?;
    Ok(t.name.clone())
}

#[test]
fn utf8_names_are_read_whole() {
    let strings = "\0héllo\0wörld\0".as_bytes();
    assert_eq!(name_of_int(&int_named(strings, 1)).unwrap(), "héllo");
    // "wörld" starts after "héllo\0" (6 bytes for 5 characters, then the NUL)
    assert_eq!(name_of_int(&int_named(strings, 8)).unwrap(), "wörld");
    // the tail of a string is a string of its own
    assert_eq!(name_of_int(&int_named(strings, 4)).unwrap(), "llo");
}

#[test]
fn offsets_inside_a_character_or_past_the_end_are_rejected() {
    let strings = "\0héllo\0".as_bytes();
    // byte 3 is the second byte of 'é'
    assert!(bad_string(strings, 3));
    let past = strings.len() as u32;
    assert!(bad_string(strings, past));
    assert!(bad_string(strings, past + 100));
}

#[test]
fn a_last_string_without_its_nul_is_rejected() {
    let strings = b"\0int\0tail";
    assert_eq!(name_of_int(&int_named(strings, 1)).unwrap(), "int");
    assert!(bad_string(strings, 5));
}

#[test]
fn a_section_that_is_not_all_utf8_is_read_string_by_string() {
    // an unused string with bytes that are not UTF-8 does not spoil the others
    let strings = b"\0\xff\xfe\0int\0";
    assert_eq!(name_of_int(&int_named(strings, 4)).unwrap(), "int");
    assert!(bad_string(strings, 1));
}
