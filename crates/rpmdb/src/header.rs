//! The part of rpm's header format the indexes need: a header blob as the
//! database stores it (no magic: entry count, data length, the entries, the
//! data, all big-endian) read into typed tag values.

use crate::Error;

/// rpm's tag data types.
const CHAR: u32 = 1;
const INT8: u32 = 2;
const INT16: u32 = 3;
const INT32: u32 = 4;
const INT64: u32 = 5;
const STRING: u32 = 6;
const BIN: u32 = 7;
const STRING_ARRAY: u32 = 8;
const I18NSTRING: u32 = 9;

/// One tag's values, as rpm hands them to its index code: numbers in host
/// byte order, strings without their NUL, a binary value whole.
#[derive(Debug, PartialEq)]
pub(crate) enum Values<'a> {
    /// Fixed-size numbers, each already in host byte order.
    Numbers(Vec<Vec<u8>>),
    Strings(Vec<&'a [u8]>),
    Binary(&'a [u8]),
}

impl Values<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Values::Numbers(v) => v.len(),
            Values::Strings(v) => v.len(),
            Values::Binary(_) => 1,
        }
    }
}

#[derive(Clone, Copy)]
struct Entry {
    tag: u32,
    kind: u32,
    offset: usize,
    count: usize,
}

/// A parsed header blob.
pub(crate) struct Header<'a> {
    entries: Vec<Entry>,
    data: &'a [u8],
}

fn be32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

impl<'a> Header<'a> {
    /// Reads `blob`; `what` names it in errors.
    pub(crate) fn parse(blob: &'a [u8], what: &str) -> Result<Header<'a>, Error> {
        let bad = |why: &str| Error::Header {
            what: what.to_string(),
            why: why.to_string(),
        };
        if blob.len() < 8 {
            return Err(bad("shorter than its counts"));
        }
        let il = be32(blob, 0) as usize;
        let dl = be32(blob, 4) as usize;
        let start = il
            .checked_mul(16)
            .and_then(|n| n.checked_add(8))
            .ok_or_else(|| bad("entry count overflows"))?;
        if start.checked_add(dl) != Some(blob.len()) {
            return Err(bad("lengths do not add up to the blob's size"));
        }
        let data = &blob[start..];
        let mut entries = Vec::with_capacity(il);
        for i in 0..il {
            let e = 8 + 16 * i;
            let entry = Entry {
                tag: be32(blob, e),
                kind: be32(blob, e + 4),
                offset: be32(blob, e + 8) as usize,
                count: be32(blob, e + 12) as usize,
            };
            if entry.offset > data.len() {
                return Err(bad(&format!("tag {} points past the data", entry.tag)));
            }
            entries.push(entry);
        }
        Ok(Header { entries, data })
    }

    /// The values of `tag`, or None when the header lacks it. A tag listed
    /// twice (a value added at install time over the package's own) reads
    /// as its last listing, as rpm does.
    pub(crate) fn get(&self, tag: u32, what: &str) -> Result<Option<Values<'a>>, Error> {
        let Some(entry) = self.entries.iter().rev().find(|e| e.tag == tag).copied() else {
            return Ok(None);
        };
        let bad = || Error::Header {
            what: what.to_string(),
            why: format!("tag {tag} (type {}) overruns the data", entry.kind),
        };
        let data = &self.data[entry.offset..];
        let numbers = |size: usize| -> Result<Values<'a>, Error> {
            let bytes = data.get(..size * entry.count).ok_or_else(bad)?;
            // Big-endian in the header, host order for the index keys.
            Ok(Values::Numbers(
                bytes
                    .chunks(size)
                    .map(|c| {
                        let mut n = c.to_vec();
                        if cfg!(target_endian = "little") {
                            n.reverse();
                        }
                        n
                    })
                    .collect(),
            ))
        };
        Ok(Some(match entry.kind {
            CHAR | INT8 => numbers(1)?,
            INT16 => numbers(2)?,
            INT32 => numbers(4)?,
            INT64 => numbers(8)?,
            BIN => Values::Binary(data.get(..entry.count).ok_or_else(bad)?),
            STRING | STRING_ARRAY | I18NSTRING => {
                // An i18n string lists its translations; the index uses the
                // first (the untranslated one).
                let wanted = if entry.kind == STRING_ARRAY {
                    entry.count
                } else {
                    1
                };
                // The count is the header's word: reserve no more than the
                // data could hold.
                let mut strings = Vec::with_capacity(wanted.min(data.len()));
                let mut rest = data;
                for _ in 0..wanted {
                    let end = rest.iter().position(|b| *b == 0).ok_or_else(bad)?;
                    strings.push(&rest[..end]);
                    rest = &rest[end + 1..];
                }
                Values::Strings(strings)
            }
            _ => return Ok(None),
        }))
    }

    /// The `INT32` values of `tag` as numbers (empty when absent).
    pub(crate) fn u32s(&self, tag: u32, what: &str) -> Result<Vec<u32>, Error> {
        Ok(match self.get(tag, what)? {
            Some(Values::Numbers(v)) => v
                .iter()
                .filter_map(|b| b.as_slice().try_into().ok().map(u32::from_ne_bytes))
                .collect(),
            _ => Vec::new(),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a header blob from (tag, type, count, data) entries.
    pub(crate) fn blob(entries: &[(u32, u32, u32, Vec<u8>)]) -> Vec<u8> {
        let mut index = Vec::new();
        let mut data = Vec::new();
        for (tag, kind, count, bytes) in entries {
            if *kind == INT32 {
                while data.len() % 4 != 0 {
                    data.push(0);
                }
            }
            for v in [*tag, *kind, data.len() as u32, *count] {
                index.extend_from_slice(&v.to_be_bytes());
            }
            data.extend_from_slice(bytes);
        }
        let mut out = Vec::new();
        out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend(index);
        out.extend(data);
        out
    }

    pub(crate) fn strings(list: &[&str]) -> Vec<u8> {
        list.iter().flat_map(|s| s.bytes().chain([0])).collect()
    }

    #[test]
    fn reads_strings_numbers_and_binary() {
        let b = blob(&[
            (1000, STRING, 1, strings(&["bash"])),
            (1047, STRING_ARRAY, 2, strings(&["bash", "/bin/sh"])),
            (1016, I18NSTRING, 2, strings(&["System", "Système"])),
            (1128, INT32, 1, 7u32.to_be_bytes().to_vec()),
            (261, BIN, 3, vec![1, 2, 3]),
        ]);
        let h = Header::parse(&b, "t").unwrap();
        assert_eq!(
            h.get(1000, "t").unwrap(),
            Some(Values::Strings(vec![b"bash"]))
        );
        assert_eq!(
            h.get(1047, "t").unwrap(),
            Some(Values::Strings(vec![&b"bash"[..], b"/bin/sh"]))
        );
        assert_eq!(
            h.get(1016, "t").unwrap(),
            Some(Values::Strings(vec![b"System"]))
        );
        assert_eq!(h.u32s(1128, "t").unwrap(), vec![7]);
        assert_eq!(h.get(261, "t").unwrap(), Some(Values::Binary(&[1, 2, 3])));
        assert_eq!(h.get(1001, "t").unwrap(), None);
    }

    #[test]
    fn a_truncated_blob_is_refused() {
        let mut b = blob(&[(1000, STRING, 1, strings(&["bash"]))]);
        b.pop();
        assert!(Header::parse(&b, "t").is_err());
        let b = blob(&[(1047, STRING_ARRAY, 3, strings(&["a", "b"]))]);
        assert!(Header::parse(&b, "t").unwrap().get(1047, "t").is_err());
        // A count no data could hold is refused, not reserved.
        let b = blob(&[(1047, STRING_ARRAY, u32::MAX, strings(&["a"]))]);
        assert!(Header::parse(&b, "t").unwrap().get(1047, "t").is_err());
    }
}
