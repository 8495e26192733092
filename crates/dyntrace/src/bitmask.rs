//! Bit patterns of the opcode description files: strings of `0`, `1` and `x` (don't care), at most 32
//! bits, read from the top bit of the first instruction byte onward.

/// A parsed bit pattern, left-aligned in a 32-bit word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bitmask {
    /// Required bit values (only where `care` is set).
    pub value: u32,
    /// Which bits must match.
    pub care: u32,
    /// Number of bits in the pattern (1..=32).
    pub len: u8,
}

/// Why a bit pattern is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BitmaskError {
    /// The pattern is empty.
    #[error("empty bitmask")]
    Empty,
    /// The pattern is longer than 32 bits.
    #[error("bitmask \"{0}\" is longer than 32 bits")]
    TooLong(String),
    /// The pattern holds something other than 0, 1 and x.
    #[error("bitmask \"{0}\" holds a character other than 0, 1 or x")]
    BadChar(String),
}

impl Bitmask {
    /// Parses a pattern such as `100000xx11010`.
    pub fn parse(text: &str) -> Result<Self, BitmaskError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(BitmaskError::Empty);
        }
        if t.len() > 32 {
            return Err(BitmaskError::TooLong(t.to_string()));
        }
        let mut value = 0u32;
        let mut care = 0u32;
        for (i, c) in t.bytes().enumerate() {
            let bit = 1u32 << (31 - i);
            match c {
                b'0' => care |= bit,
                b'1' => {
                    care |= bit;
                    value |= bit;
                }
                b'x' | b'X' => {}
                _ => return Err(BitmaskError::BadChar(t.to_string())),
            }
        }
        Ok(Bitmask {
            value,
            care,
            len: t.len() as u8,
        })
    }

    /// Whether the pattern matches the instruction bytes packed big-endian into `word` (missing bytes zero),
    /// of which `avail` bytes are real.
    #[inline]
    pub fn matches(&self, word: u32, avail: usize) -> bool {
        (self.len as usize) <= avail * 8 && (word ^ self.value) & self.care == 0
    }

    /// How many bits must match: the specificity used to choose among several matches.
    pub fn specificity(&self) -> u32 {
        self.care.count_ones()
    }

    /// Whole bytes the pattern spans (a prefix of this length is skipped).
    pub fn byte_len(&self) -> usize {
        (self.len as usize).div_ceil(8)
    }

    /// Whether the first pattern byte can be `b`.
    pub fn first_byte_can_be(&self, b: u8) -> bool {
        let care = (self.care >> 24) as u8;
        let value = (self.value >> 24) as u8;
        (b ^ value) & care == 0
    }

    /// The pattern back as text.
    pub fn to_text(&self) -> String {
        (0..self.len)
            .map(|i| {
                let bit = 1u32 << (31 - i);
                if self.care & bit == 0 {
                    'x'
                } else if self.value & bit != 0 {
                    '1'
                } else {
                    '0'
                }
            })
            .collect()
    }
}

/// Bits of a byte as a pattern string (`0`/`1`, eight of them).
pub fn byte_bits(b: u8) -> String {
    format!("{b:08b}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches() {
        let m = Bitmask::parse("100000xx11010").unwrap();
        assert_eq!(m.len, 13);
        assert_eq!(m.specificity(), 11);
        // 0x83 0xD0 = adc eax, imm8 (mod=11, reg=010)
        assert!(m.matches(0x83D0_0000, 3));
        assert!(!m.matches(0x83C0_0000, 3));
        assert!(!m.matches(0x8300_0000, 1));
        assert_eq!(m.to_text(), "100000xx11010");
        assert!(m.first_byte_can_be(0x81));
        assert!(!m.first_byte_can_be(0x90));
        assert_eq!(m.byte_len(), 2);
    }

    #[test]
    fn rejects_bad_patterns() {
        assert_eq!(Bitmask::parse(""), Err(BitmaskError::Empty));
        assert!(matches!(
            Bitmask::parse("012"),
            Err(BitmaskError::BadChar(_))
        ));
        assert!(matches!(
            Bitmask::parse(&"1".repeat(33)),
            Err(BitmaskError::TooLong(_))
        ));
    }
}
