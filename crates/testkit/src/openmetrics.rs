//! A strict parser of the OpenMetrics text format (what `dtrace -x metrics=...` serves), for tests
//! of the exposition: the subset with `# TYPE`, `# HELP`, samples without timestamps or exemplars
//! and the final `# EOF`. [`parse`] returns the families' types and the samples, or what is wrong.

use std::collections::BTreeMap;

/// A sample's labels by name.
pub type Labels = BTreeMap<String, String>;

/// One parsed OpenMetrics sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's name (family and suffix).
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_' || ch == ':')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':')
}

/// A strict parser of the OpenMetrics text format (the subset with TYPE, HELP, samples without
/// timestamps or exemplars, `# EOF`): every sample must belong to the family declared before it,
/// with the suffixes its type allows; histograms must be cumulative and end in `+Inf`, with a
/// `_count` equal to it.
pub fn parse(text: &str) -> Result<(BTreeMap<String, String>, Vec<Sample>), String> {
    let body = text.strip_suffix("# EOF\n").ok_or("no # EOF at the end")?;
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    let mut family: Option<(String, String)> = None;
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut p = rest.splitn(3, ' ');
            let (kw, name, arg) = (p.next(), p.next(), p.next());
            let name = name.ok_or(format!("bad line {line:?}"))?;
            if !valid_name(name) {
                return Err(format!("bad family name {name:?}"));
            }
            match (kw, arg) {
                (Some("TYPE"), Some(t @ ("counter" | "gauge" | "histogram"))) => {
                    if types.insert(name.to_string(), t.to_string()).is_some() {
                        return Err(format!("family {name} declared twice"));
                    }
                    family = Some((name.to_string(), t.to_string()));
                }
                (Some("HELP"), Some(_)) if family.as_ref().is_some_and(|f| f.0 == name) => {}
                _ => return Err(format!("bad metadata line {line:?}")),
            }
            continue;
        }
        let (fam, ty) = family
            .clone()
            .ok_or(format!("sample before TYPE: {line:?}"))?;
        let name_end = line
            .find(['{', ' '])
            .ok_or(format!("bad sample {line:?}"))?;
        let name = &line[..name_end];
        let mut rest = &line[name_end..];
        let mut labels = BTreeMap::new();
        if let Some(r) = rest.strip_prefix('{') {
            let mut chars = r.char_indices().peekable();
            let end;
            loop {
                let start = chars.peek().map(|c| c.0).ok_or("unterminated labels")?;
                let eq = r[start..].find('=').ok_or("label without =")? + start;
                let key = &r[start..eq];
                if !valid_name(key) || key.contains(':') {
                    return Err(format!("bad label name {key:?}"));
                }
                while chars.peek().is_some_and(|c| c.0 <= eq) {
                    chars.next();
                }
                if chars.next().map(|c| c.1) != Some('"') {
                    return Err("label value not quoted".into());
                }
                let mut v = String::new();
                loop {
                    match chars.next().ok_or("unterminated label value")?.1 {
                        '"' => break,
                        '\\' => match chars.next().ok_or("bad escape")?.1 {
                            '\\' => v.push('\\'),
                            '"' => v.push('"'),
                            'n' => v.push('\n'),
                            c => return Err(format!("bad escape \\{c}")),
                        },
                        '\n' => return Err("raw newline in label".into()),
                        c => v.push(c),
                    }
                }
                if labels.insert(key.to_string(), v).is_some() {
                    return Err(format!("label {key} twice"));
                }
                match chars.next().map(|c| c.1) {
                    Some(',') => continue,
                    Some('}') => {
                        end = chars.peek().map(|c| c.0).or(Some(r.len()));
                        break;
                    }
                    _ => return Err("labels not closed".into()),
                }
            }
            rest = &r[end.unwrap_or(r.len())..];
        }
        let value = rest
            .strip_prefix(' ')
            .ok_or(format!("no value: {line:?}"))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().map_err(|_| format!("bad value {v:?}"))?,
        };
        let allowed: &[&str] = match ty.as_str() {
            "counter" => &["_total"],
            "gauge" => &[""],
            _ => &["_bucket", "_count", "_sum"],
        };
        let suffix = name
            .strip_prefix(fam.as_str())
            .filter(|s| allowed.contains(s))
            .ok_or(format!("sample {name} not of family {fam} ({ty})"))?;
        if suffix == "_bucket" && !labels.contains_key("le") {
            return Err(format!("bucket without le: {line:?}"));
        }
        if ty == "counter" && value < 0.0 {
            return Err(format!("negative counter {line:?}"));
        }
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    // histograms: cumulative buckets ending in +Inf, _count equal to it
    let mut series: BTreeMap<(String, Labels), Vec<(f64, f64)>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name.ends_with("_bucket")) {
        let mut l = s.labels.clone();
        let le = l.remove("le").unwrap_or_default();
        let le: f64 = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().map_err(|_| format!("bad le {le:?}"))?
        };
        let fam = s.name.trim_end_matches("_bucket").to_string();
        series.entry((fam, l)).or_default().push((le, s.value));
    }
    for ((fam, l), b) in &series {
        if b.windows(2).any(|w| w[0].0 >= w[1].0 || w[0].1 > w[1].1) {
            return Err(format!("{fam} {l:?}: buckets not cumulative"));
        }
        let last = b.last().ok_or("empty histogram")?;
        if last.0 != f64::INFINITY {
            return Err(format!("{fam} {l:?}: no +Inf bucket"));
        }
        let count = samples
            .iter()
            .find(|s| s.name == format!("{fam}_count") && &s.labels == l)
            .ok_or(format!("{fam} {l:?}: no _count"))?;
        if count.value != last.1 {
            return Err(format!("{fam} {l:?}: _count differs from +Inf"));
        }
    }
    Ok((types, samples))
}

/// The sample named `name` with exactly the labels `labels`.
pub fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    samples.iter().find(|s| s.name == name && s.labels == want)
}
