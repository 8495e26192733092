//! Hash maps keyed by small integers (probe tags, thread and process ids) on the per-event path,
//! with a hasher much cheaper than the standard library's SipHash; none of their keys come from
//! untrusted input that could be chosen to collide.

use std::collections::{HashMap, HashSet};

/// The hasher.
pub(crate) type Fast = foldhash::fast::RandomState;

/// A map keyed by probe tag (or another `u32` id).
pub(crate) type TagMap<V> = HashMap<u32, V, Fast>;

/// A set of probe tags.
pub(crate) type TagSet = HashSet<u32, Fast>;
