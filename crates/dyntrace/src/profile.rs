//! The execution profile: instruction counts (and cycle timings when measured) per program image, memory
//! region type and op, and its rendering as the XML document `dyntrace.dtd` describes.

use crate::maps::RegionType;
use crate::oplist::{OpId, OpKey, OpList};
use crate::perf::TimingEvent;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// One program image run by a traced process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Path of the image.
    pub name: String,
    /// The process that ran it.
    pub pid: i32,
}

/// Count and timing of one (program, region, op) cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// Times executed.
    pub n: u64,
    /// Sum of cycles of the timed executions.
    pub cycles: u64,
    /// Fewest cycles of one execution.
    pub min: u64,
    /// Most cycles of one execution.
    pub max: u64,
}

/// Key of one profile cell.
pub type Cell = (u32, RegionType, OpKey);

/// All counts of a trace.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Program images, in the order they started.
    pub programs: Vec<Program>,
    /// Counts.
    pub counts: HashMap<Cell, Stat>,
    /// What timed the instructions, when they were timed.
    pub timer: Option<TimingEvent>,
}

/// Whether the document is a checkpoint or the final profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Written while the trace goes on.
    Checkpoint,
    /// Written when it ended.
    Final,
}

/// Prefix id of the `i`th prefix: A..Z, then AA, AB, ...
pub fn prefix_id(mut i: usize) -> String {
    let mut s = Vec::new();
    loop {
        s.push(b'A' + (i % 26) as u8);
        if i < 26 {
            break;
        }
        i = i / 26 - 1;
    }
    s.reverse();
    String::from_utf8(s).unwrap_or_default()
}

/// Escapes text for an XML attribute value.
pub fn escape_attr(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "&#{};", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

impl Profile {
    /// Registers a program image and returns its index.
    pub fn add_program(&mut self, name: &str, pid: i32) -> u32 {
        self.programs.push(Program {
            name: name.to_string(),
            pid,
        });
        (self.programs.len() - 1) as u32
    }

    /// Counts `n` executions, with the cycles of one of them when timed.
    #[inline]
    pub fn count(&mut self, cell: Cell, n: u64, cycles: Option<u64>) {
        let s = self.counts.entry(cell).or_default();
        if let Some(c) = cycles {
            if s.n == 0 {
                s.min = c;
            }
            s.cycles += c;
            s.min = s.min.min(c);
            s.max = s.max.max(c);
        }
        s.n += n;
    }

    /// Total instructions counted.
    pub fn total(&self) -> u64 {
        self.counts.values().map(|s| s.n).sum()
    }

    /// Renders the profile as XML.
    pub fn render(&self, ops: &OpList, zeros: bool, state: State) -> String {
        let mut out = String::new();
        out.push_str("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n");
        let st = match state {
            State::Checkpoint => "checkpoint",
            State::Final => "final",
        };
        match self.timer {
            Some(t) => {
                let _ = writeln!(out, "<dyntrace state=\"{st}\" timer=\"{}\">", t.name());
            }
            None => {
                let _ = writeln!(out, "<dyntrace state=\"{st}\">");
            }
        }
        for (i, p) in ops.prefixes.iter().enumerate() {
            let _ = writeln!(
                out,
                "    <prefix id=\"{}\" bitmask=\"{}\" detail=\"{}\" />",
                prefix_id(i),
                escape_attr(&p.bitmask_text),
                escape_attr(&p.detail)
            );
        }
        let mut tree: BTreeMap<u32, BTreeMap<RegionType, BTreeMap<OpKey, Stat>>> = BTreeMap::new();
        for (&(prog, region, key), &stat) in &self.counts {
            if stat.n == 0 && !zeros {
                continue;
            }
            tree.entry(prog)
                .or_default()
                .entry(region)
                .or_default()
                .insert(key, stat);
        }
        for (i, prog) in self.programs.iter().enumerate() {
            let _ = writeln!(
                out,
                "    <program name=\"{}\" pid=\"{}\">",
                escape_attr(&prog.name),
                prog.pid
            );
            if let Some(regions) = tree.get_mut(&(i as u32)) {
                for (region, cells) in regions.iter_mut() {
                    if zeros {
                        for j in 0..ops.ops.len() {
                            let key = OpKey {
                                op: OpId::Known(j as u32),
                                prefixes: 0,
                            };
                            cells.entry(key).or_default();
                        }
                    }
                    let _ = writeln!(out, "        <region type=\"{}\">", region.name());
                    for (key, stat) in cells.iter() {
                        self.render_count(&mut out, ops, key, stat);
                    }
                    out.push_str("        </region>\n");
                }
            }
            out.push_str("    </program>\n");
        }
        out.push_str("</dyntrace>\n");
        out
    }

    fn render_count(&self, out: &mut String, ops: &OpList, key: &OpKey, stat: &Stat) {
        let (bits, mnemonic, detail) = ops.describe(key.op);
        let _ = write!(
            out,
            "            <opcount bitmask=\"{}\" mnemonic=\"{}\"",
            escape_attr(&bits),
            escape_attr(mnemonic)
        );
        if let Some(d) = detail {
            let _ = write!(out, " detail=\"{}\"", escape_attr(d));
        }
        if key.prefixes != 0 {
            let ids: Vec<String> = (0..32)
                .filter(|b| key.prefixes & (1 << b) != 0)
                .map(prefix_id)
                .collect();
            let _ = write!(out, " prefixes=\"{}\"", ids.join(","));
        }
        let _ = write!(out, " n=\"{}\"", stat.n);
        if self.timer.is_some() && stat.n > 0 {
            let _ = write!(
                out,
                " cycles=\"{}\" min=\"{}\" max=\"{}\"",
                stat.cycles, stat.min, stat.max
            );
        }
        out.push_str(" />\n");
    }
}

/// Writes `contents` to `path` so that a crash never leaves a torn file: a temporary file beside it is
/// written and synced, then renamed over it, and the directory is synced.
pub fn write_atomically(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dyntrace".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ids_run_like_spreadsheet_columns() {
        assert_eq!(prefix_id(0), "A");
        assert_eq!(prefix_id(25), "Z");
        assert_eq!(prefix_id(26), "AA");
        assert_eq!(prefix_id(27), "AB");
        assert_eq!(prefix_id(52), "BA");
    }

    #[test]
    fn renders_counts_timing_and_zeros() {
        let ops = OpList::parse(
            r#"<oplist><prefix bitmask="11110000" detail="LOCK &amp; co"/>
            <op bitmask="10010000" mnemonic="NOP"><description>n</description></op>
            <op bitmask="11000011" mnemonic="RET" detail="near"><description>r</description></op></oplist>"#,
            "t",
        )
        .unwrap();
        let mut p = Profile::default();
        let prog = p.add_program("/bin/x", 7);
        let key = OpKey {
            op: OpId::Known(1),
            prefixes: 1,
        };
        p.count((prog, RegionType::TextProgram, key), 1, None);
        p.count((prog, RegionType::TextProgram, key), 2, None);
        let xml = p.render(&ops, false, State::Final);
        assert!(xml.contains("<prefix id=\"A\" bitmask=\"11110000\" detail=\"LOCK &amp; co\" />"));
        assert!(xml.contains("<program name=\"/bin/x\" pid=\"7\">"));
        assert!(xml.contains(
            "<opcount bitmask=\"11000011\" mnemonic=\"RET\" detail=\"near\" prefixes=\"A\" n=\"3\" />"
        ));
        assert!(!xml.contains("NOP"));
        let xml = p.render(&ops, true, State::Checkpoint);
        assert!(xml.contains("<opcount bitmask=\"10010000\" mnemonic=\"NOP\" n=\"0\" />"));
        assert!(xml.contains("state=\"checkpoint\""));
        p.timer = Some(TimingEvent::Cycles);
        p.count((prog, RegionType::Stack, key), 1, Some(40));
        p.count((prog, RegionType::Stack, key), 1, Some(10));
        let xml = p.render(&ops, false, State::Final);
        assert!(
            xml.contains("n=\"2\" cycles=\"50\" min=\"10\" max=\"40\""),
            "{xml}"
        );
        assert_eq!(p.total(), 5);
    }

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = std::env::temp_dir().join(format!("dyntrace-aw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("p.trace");
        write_atomically(&f, "one").unwrap();
        write_atomically(&f, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "two");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert!(write_atomically(&dir.join("no/such/dir/x"), "x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
