//! The keys rpm's secondary indexes hold for one header.
//!
//! Each index maps a key to the list of (header number, position) pairs of
//! the headers that carry it. The rules are rpm's own (its `tag2index`),
//! restated here because they are the format: an index a writer fills
//! differently is an index rpm reads wrongly (`rpm -qf`, `--whatprovides`,
//! and the erase-time dependency check all go through them).
//! - every value of the tag is a key, its position the item's tag number;
//! - Group of a header without one is `Unknown`;
//! - Requirename leaves out install-time-only prerequisites (`Requires(post)`
//!   and friends without an erase-time role);
//! - Triggername lists a name once per header;
//! - the file trigger indexes use the trigger's own index as tag number;
//! - a rich dependency (`(a if b)`) is a key itself, and so is each name
//!   inside it, a name in a condition prefixed `!`;
//! - an empty key is stored as one NUL byte.

use crate::header::{Header, Values};
use crate::Error;

/// The index files of RHEL 8's rpm (4.14), with the tag each is keyed on.
pub(crate) const INDEXES: [(&str, u32); 18] = [
    ("Name", NAME),
    ("Basenames", 1117),
    ("Group", GROUP),
    ("Requirename", REQUIRENAME),
    ("Providename", 1047),
    ("Conflictname", CONFLICTNAME),
    ("Obsoletename", 1090),
    ("Triggername", TRIGGERNAME),
    ("Dirnames", 1118),
    ("Installtid", 1128),
    ("Sigmd5", 261),
    ("Sha1header", 269),
    ("Filetriggername", FILETRIGGERNAME),
    ("Transfiletriggername", TRANSFILETRIGGERNAME),
    ("Recommendname", RECOMMENDNAME),
    ("Suggestname", SUGGESTNAME),
    ("Supplementname", SUPPLEMENTNAME),
    ("Enhancename", ENHANCENAME),
];

const NAME: u32 = 1000;
const GROUP: u32 = 1016;
const REQUIREFLAGS: u32 = 1048;
const REQUIRENAME: u32 = 1049;
const CONFLICTNAME: u32 = 1054;
const TRIGGERNAME: u32 = 1066;
const RECOMMENDNAME: u32 = 5046;
const SUGGESTNAME: u32 = 5049;
const SUPPLEMENTNAME: u32 = 5052;
const ENHANCENAME: u32 = 5055;
const FILETRIGGERNAME: u32 = 5069;
const FILETRIGGERINDEX: u32 = 5070;
const TRANSFILETRIGGERNAME: u32 = 5079;
const TRANSFILETRIGGERINDEX: u32 = 5080;

/// Dependency flags (rpmsenseFlags) that make a requirement install-time
/// only, and those that give it an erase-time role.
const POSTTRANS: u32 = 1 << 5;
const PRETRANS: u32 = 1 << 7;
const SCRIPT_PRE: u32 = 1 << 9;
const SCRIPT_POST: u32 = 1 << 10;
const SCRIPT_PREUN: u32 = 1 << 11;
const SCRIPT_POSTUN: u32 = 1 << 12;
const RPMLIB: u32 = 1 << 24;
const KEYRING: u32 = 1 << 26;
const INSTALL_ONLY: u32 = SCRIPT_PRE | SCRIPT_POST | RPMLIB | KEYRING | PRETRANS | POSTTRANS;
const ERASE_ONLY: u32 = SCRIPT_PREUN | SCRIPT_POSTUN;

/// The (key, tag number) pairs header `h` adds to the index on `tag`.
pub(crate) fn keys(h: &Header, tag: u32, what: &str) -> Result<Vec<(Vec<u8>, u32)>, Error> {
    let values = match h.get(tag, what)? {
        Some(v) if v.len() > 0 => v,
        _ if tag == GROUP => Values::Strings(vec![b"Unknown"]),
        _ => return Ok(Vec::new()),
    };
    let flags = if tag == REQUIRENAME {
        h.u32s(REQUIREFLAGS, what)?
    } else {
        Vec::new()
    };
    let positions = match tag {
        FILETRIGGERNAME => Some(h.u32s(FILETRIGGERINDEX, what)?),
        TRANSFILETRIGGERNAME => Some(h.u32s(TRANSFILETRIGGERINDEX, what)?),
        _ => None,
    };
    let rich_capable = matches!(
        tag,
        REQUIRENAME | CONFLICTNAME | SUGGESTNAME | SUPPLEMENTNAME | RECOMMENDNAME | ENHANCENAME
    );
    let mut out = Vec::new();
    for i in 0..values.len() {
        let number = match &positions {
            Some(p) => match p.get(i) {
                Some(n) => *n,
                None => continue,
            },
            None => i as u32,
        };
        if let Some(f) = flags.get(i) {
            if f & INSTALL_ONLY != 0 && f & ERASE_ONLY == 0 {
                continue;
            }
        }
        let key: Vec<u8> = match &values {
            Values::Numbers(v) => v[i].clone(),
            Values::Binary(b) => b.to_vec(),
            Values::Strings(s) => {
                if tag == TRIGGERNAME && s[..i].contains(&s[i]) {
                    continue;
                }
                s[i].to_vec()
            }
        };
        let rich = rich_capable && key.first() == Some(&b'(');
        if rich {
            out.push((stored(key.clone()), number));
            out.extend(rich_names(&key).into_iter().map(|n| (stored(n), number)));
        } else {
            out.push((stored(key), number));
        }
    }
    Ok(out)
}

fn stored(key: Vec<u8>) -> Vec<u8> {
    if key.is_empty() {
        vec![0]
    } else {
        key
    }
}

/// The names inside rich dependency `dep` as the indexes list them: sorted,
/// each once, a name in an `if`/`unless` condition prefixed `!` (an `else`
/// branch lists the condition's names again, unprefixed). A dependency that
/// does not parse adds no names.
pub(crate) fn rich_names(dep: &[u8]) -> Vec<Vec<u8>> {
    let mut parse = RichParse {
        s: dep,
        pos: 0,
        names: Vec::new(),
        negated: false,
        marks: Vec::new(),
    };
    if parse.group().is_none() {
        return Vec::new();
    }
    let mut names = parse.names;
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|mut n| {
            if n[0] == b' ' {
                n.remove(0);
            }
            n
        })
        .collect()
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Single,
    Plain,
    Conditional,
    Else,
}

struct RichParse<'a> {
    s: &'a [u8],
    pos: usize,
    /// Each name with its marker byte: ' ' plain, '!' negated.
    names: Vec<Vec<u8>>,
    negated: bool,
    /// Per open group: where its current condition's names start.
    marks: Vec<usize>,
}

impl RichParse<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn skip_white(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r' | b',')) {
            self.pos += 1;
        }
    }

    /// A token: up to white space, a comma, or a `)` that closes nothing
    /// opened inside the token (`perl(Foo)` is one token).
    fn token(&mut self) -> &[u8] {
        let start = self.pos;
        let mut depth = 0;
        while let Some(c) = self.peek() {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b',') {
                break;
            }
            if c == b')' {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            }
            if c == b'(' {
                depth += 1;
            }
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }

    /// One parenthesised group, `pos` at its `(`.
    fn group(&mut self) -> Option<()> {
        self.marks.push(self.names.len());
        if self.peek() != Some(b'(') {
            return None;
        }
        self.pos += 1;
        let mut last = Op::Single;
        loop {
            self.skip_white();
            match self.peek()? {
                b')' => return None,
                b'(' => self.group()?,
                _ => self.simple()?,
            }
            self.skip_white();
            if self.peek()? == b')' {
                break;
            }
            let op = match self.token() {
                b"and" | b"or" | b"with" | b"without" => Op::Plain,
                b"if" | b"unless" => Op::Conditional,
                b"else" => Op::Else,
                _ => return None,
            };
            let mark = self.marks.last_mut().expect("inside a group");
            match op {
                Op::Conditional => {
                    *mark = self.names.len();
                    self.negated = !self.negated;
                }
                Op::Else => {
                    let condition: Vec<Vec<u8>> = self.names[*mark..].to_vec();
                    for mut n in condition {
                        n[0] = if n[0] == b'!' { b' ' } else { b'!' };
                        self.names.push(n);
                    }
                    self.negated = !self.negated;
                }
                _ => {}
            }
            last = op;
        }
        self.pos += 1;
        self.marks.pop();
        if last == Op::Conditional {
            self.negated = !self.negated;
        }
        Some(())
    }

    /// `name [sense version]`.
    fn simple(&mut self) -> Option<()> {
        let name = self.token().to_vec();
        if name.is_empty() {
            return None;
        }
        if !(name.len() > 7 && name.starts_with(b"rpmlib(")) {
            let marker = if self.negated { b'!' } else { b' ' };
            self.names.push([&[marker][..], &name].concat());
        }
        self.skip_white();
        let at = self.pos;
        let sense = self.token();
        if !sense.is_empty() && sense.len() <= 2 && sense.iter().all(|c| b"<>=".contains(c)) {
            self.skip_white();
            if self.token().is_empty() {
                return None;
            }
        } else {
            self.pos = at;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::tests::{blob, strings};

    fn names(dep: &str) -> Vec<String> {
        rich_names(dep.as_bytes())
            .into_iter()
            .map(|n| String::from_utf8(n).unwrap())
            .collect()
    }

    #[test]
    fn rich_dependency_names_mark_conditions() {
        assert_eq!(names("(foo >= 1.0 and bar)"), ["bar", "foo"]);
        assert_eq!(names("(foo if bar)"), ["foo", "!bar"]);
        assert_eq!(names("(foo unless (bar or baz))"), ["foo", "!bar", "!baz"]);
        assert_eq!(names("(a if b else c)"), ["a", "b", "c", "!b"]);
        assert_eq!(names("((a if b) and c)"), ["a", "c", "!b"]);
        assert_eq!(
            names("(perl(Foo::Bar) or rpmlib(RichDependencies))"),
            ["perl(Foo::Bar)"]
        );
        assert!(names("(foo").is_empty());
        assert!(names("(foo frob bar)").is_empty());
    }

    #[test]
    fn requirements_skip_install_time_prerequisites() {
        let b = blob(&[
            (
                REQUIRENAME,
                8,
                4,
                strings(&["/bin/sh", "coreutils", "glibc", "(a if b)"]),
            ),
            (
                REQUIREFLAGS,
                4,
                4,
                [SCRIPT_POST, SCRIPT_POST | SCRIPT_PREUN, 0, 0]
                    .iter()
                    .flat_map(|f| f.to_be_bytes())
                    .collect(),
            ),
        ]);
        let h = Header::parse(&b, "t").unwrap();
        let got: Vec<(String, u32)> = keys(&h, REQUIRENAME, "t")
            .unwrap()
            .into_iter()
            .map(|(k, n)| (String::from_utf8(k).unwrap(), n))
            .collect();
        let want = [
            ("coreutils", 1),
            ("glibc", 2),
            ("(a if b)", 3),
            ("a", 3),
            ("!b", 3),
        ];
        assert_eq!(got, want.map(|(k, n)| (k.to_string(), n)));
    }

    #[test]
    fn group_defaults_and_triggers_list_once() {
        let b = blob(&[(TRIGGERNAME, 8, 3, strings(&["glibc", "bash", "glibc"]))]);
        let h = Header::parse(&b, "t").unwrap();
        assert_eq!(
            keys(&h, GROUP, "t").unwrap(),
            vec![(b"Unknown".to_vec(), 0)]
        );
        assert_eq!(
            keys(&h, TRIGGERNAME, "t").unwrap(),
            vec![(b"glibc".to_vec(), 0), (b"bash".to_vec(), 1)]
        );
    }
}
