//! SVG flame graphs (`-x flamegraph=FILE.svg`) drawn by the `inferno` crate from the folded stacks of
//! [`crate::oformat::folded`].

use crate::error::{ConsumerError, Result};

/// Draws `lines` (folded stacks) as an SVG flame graph titled `title` into `out`.
pub fn svg(lines: &[String], title: &str, out: &mut Vec<u8>) -> Result<()> {
    if lines.is_empty() {
        return Err(ConsumerError::Backend(
            "no stacks to draw: no stack-keyed aggregation has entries".into(),
        ));
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "samples".to_string();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(|e| ConsumerError::Io(format!("drawing the flame graph: {e}")))
}
