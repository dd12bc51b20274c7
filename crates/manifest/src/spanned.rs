//! Positions for YAML values, with a YAML library that reports them only on errors.
//!
//! serde_yaml 0.9 attaches a line and column to an error, never to a value
//! that deserialized fine; yet most of our errors (an unknown `${var}`, a repo
//! id defined twice, a bad fingerprint) are found after deserializing, often
//! after merging several files. So a value we may have to point at is
//! deserialized as [`Spanned`], which records its file and its *ordinal*: its
//! rank among the spanned values of that document. When an error needs the
//! position, [`locate`] deserializes the same text again, told to fail at
//! that ordinal, and serde_yaml attaches the position to the failure. That
//! costs one more parse per reported error and nothing on success.
//!
//! The bookkeeping lives in a thread-local that [`from_yaml`] and [`locate`]
//! install for the duration of one `serde_yaml::from_str` call.
//!
//! Must not: substitute variables, validate values or read files. The second
//! parse must retrace the first exactly, so deserialization only records what
//! the file says; everything that can fail on a value happens later.

use std::cell::Cell;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::Path;

use serde::de::{self, DeserializeOwned, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::{Location, ManifestError, Position};

/// Index of a file in the loader's file table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId(pub(crate) usize);

/// Where a value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum At {
    /// The `ordinal`-th spanned value of a YAML file: found again by [`locate`].
    Yaml { file: FileId, ordinal: u32 },
    /// A known position in a file we parse ourselves (a `.repo` file).
    Text { file: FileId, position: Position },
    /// Deserialized outside the loader (no file to point at).
    Nowhere,
}

impl At {
    pub(crate) fn file(&self) -> Option<FileId> {
        match *self {
            At::Yaml { file, .. } | At::Text { file, .. } => Some(file),
            At::Nowhere => None,
        }
    }
}

/// A value and where it came from. Equality, ordering and hashing look at the
/// value only, so that merging can deduplicate values that come from
/// different files.
#[derive(Clone, Debug)]
pub(crate) struct Spanned<T> {
    pub(crate) value: T,
    pub(crate) at: At,
}

/// The string form of [`Spanned`], by far the most common.
pub(crate) type Str = Spanned<String>;

impl<T> Spanned<T> {
    pub(crate) fn new(value: T, at: At) -> Self {
        Spanned { value, at }
    }
}

impl<T: PartialEq> PartialEq for Spanned<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}
impl<T: Eq> Eq for Spanned<T> {}
impl<T: PartialOrd> PartialOrd for Spanned<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.value.partial_cmp(&other.value)
    }
}
impl<T: Ord> Ord for Spanned<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.value.cmp(&other.value)
    }
}
impl<T: Hash> Hash for Spanned<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.value.hash(state)
    }
}

#[derive(Clone, Copy)]
struct State {
    file: FileId,
    next: u32,
    target: Option<u32>,
}

thread_local! {
    static STATE: Cell<Option<State>> = const { Cell::new(None) };
}

/// Installs a state for one parse and restores the previous one on drop.
struct Installed(Option<State>);

impl Installed {
    fn new(state: State) -> Self {
        Installed(STATE.with(|s| s.replace(Some(state))))
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        STATE.with(|s| s.set(self.0));
    }
}

enum Claim {
    At(At),
    /// This is the value [`locate`] is looking for: fail here.
    Target,
}

/// Takes the next ordinal of the document being deserialized.
fn claim() -> Claim {
    STATE.with(|s| match s.get() {
        None => Claim::At(At::Nowhere),
        Some(mut state) => {
            let ordinal = state.next;
            state.next += 1;
            s.set(Some(state));
            if state.target == Some(ordinal) {
                Claim::Target
            } else {
                Claim::At(At::Yaml {
                    file: state.file,
                    ordinal,
                })
            }
        }
    })
}

/// A visitor that accepts nothing: serde_yaml then reports the position of
/// whatever node it was asked to visit.
struct Fail;

impl<'de> Visitor<'de> for Fail {
    type Value = std::convert::Infallible;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("nothing (locating a value)")
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Spanned<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match claim() {
            Claim::At(at) => Ok(Spanned::new(T::deserialize(d)?, at)),
            Claim::Target => match d.deserialize_any(Fail)? {},
        }
    }
}

/// A string or a list of strings (`include: a.yaml` or `include: [a, b]`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct OneOrMany(pub(crate) Vec<Str>);

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OneOrMany, E> {
                match claim() {
                    Claim::At(at) => Ok(OneOrMany(vec![Spanned::new(v.to_string(), at)])),
                    Claim::Target => Err(E::custom("located")),
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OneOrMany, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Str>()? {
                    items.push(item);
                }
                Ok(OneOrMany(items))
            }
        }
        d.deserialize_any(V)
    }
}

/// Deserializes one YAML document, recording spans against `file`.
pub(crate) fn from_yaml<T: DeserializeOwned>(
    text: &str,
    file: FileId,
) -> Result<T, serde_yaml::Error> {
    let _state = Installed::new(State {
        file,
        next: 0,
        target: None,
    });
    serde_yaml::from_str(text)
}

/// Finds the position of the `ordinal`-th spanned value of `text`, which
/// must be the same text, deserialized as the same type, as when it was
/// recorded.
pub(crate) fn locate<T: DeserializeOwned>(text: &str, ordinal: u32) -> Option<Position> {
    let _state = Installed::new(State {
        file: FileId(usize::MAX),
        next: 0,
        target: Some(ordinal),
    });
    match serde_yaml::from_str::<T>(text) {
        Ok(_) => None,
        Err(e) => e.location().map(|l| Position::new(l.line(), l.column())),
    }
}

/// The signature of `locate::<T>` for the type a file was parsed as.
pub(crate) type Locator = fn(&str, u32) -> Option<Position>;

/// Turns a serde_yaml error into a located [`ManifestError`].
pub(crate) fn yaml_error(err: &serde_yaml::Error, file: &Path) -> ManifestError {
    let position = err.location().map(|l| Position::new(l.line(), l.column()));
    let location = Location {
        file: file.to_path_buf(),
        position,
    };
    let mut message = err.to_string();
    if let Some(p) = position {
        let suffix = format!(" at line {} column {}", p.line, p.column);
        if let Some(i) = message.find(&suffix) {
            message.replace_range(i..i + suffix.len(), "");
        }
    }
    if let Some(i) = message.find("unknown field `") {
        let rest = &message[i + "unknown field `".len()..];
        let named = |field: &str| {
            (1..=64).contains(&field.len())
                && field
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        let field = rest.split_once('`').map_or(rest, |(f, _)| f);
        if !named(field) {
            // Not a key anyone would write in a manifest: the file is
            // something else (`/etc/shadow`), and its line is not repeated.
            return ManifestError::Syntax {
                location,
                message: "a key that is no field name: is this file a manifest?".to_string(),
            };
        }
        if let Some((field, expected)) = rest.split_once("`, expected ") {
            return ManifestError::UnknownField {
                location,
                field: field.to_string(),
                expected: expected.to_string(),
            };
        }
        if let Some((field, _)) = rest.split_once("`, there are no fields") {
            return ManifestError::UnknownField {
                location,
                field: field.to_string(),
                expected: "no fields".to_string(),
            };
        }
    }
    if message.starts_with("EOF while parsing") {
        message = "the file is empty: expected a YAML mapping".to_string();
    }
    // A file that is not a mapping at all is no manifest (an `include:` of
    // `/etc/shadow`): its content is not repeated. Inside a manifest, the
    // value a field has is the useful part of the message.
    if message.contains("expected struct") || message.contains("(a YAML mapping)") {
        message = without_values(&message);
    }
    ManifestError::Syntax {
        location,
        message: crate::input::cut_quoted(&message),
    }
}

/// `message` with every string value it quotes (serde's `string "…"`)
/// replaced by its kind; the position still says where to look.
fn without_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find("string \"") {
        out.push_str(&rest[..i]);
        out.push_str("a string");
        let after = &rest[i + "string \"".len()..];
        // The closing quote: the first one not escaped.
        let mut end = after.len();
        let mut escaped = false;
        for (j, c) in after.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = j + 1;
                    break;
                }
                _ => escaped = false,
            }
        }
        rest = &after[end.min(after.len())..];
    }
    out.push_str(rest);
    out
}

/// What a manifest file (or a lockfile, an overrides file) may be, checked
/// before the YAML or JSON parser sees it: the parser's time grows with
/// nesting and entries, and no real file comes near these (a full RHCOS
/// manifest lists about 500 packages, its lockfile about 4,000 lines).
pub(crate) const MAX_FILE_BYTES: usize = 1 << 20;
/// Flow collections (`[`, `{`) open at once.
pub(crate) const MAX_NESTING: usize = 64;
/// Lines plus flow-list separators: every entry is one or the other.
pub(crate) const MAX_ENTRIES: usize = 20_000;

/// Refuses a text beyond the limits, naming the limit and where it was
/// passed (a line, for nesting).
pub(crate) fn check_limits(text: &str, file: &Path) -> Result<(), ManifestError> {
    let at = |line: usize| Location {
        file: file.to_path_buf(),
        position: (line > 0).then(|| Position::new(line, 1)),
    };
    if text.len() > MAX_FILE_BYTES {
        return Err(ManifestError::Syntax {
            location: at(0),
            message: format!(
                "the file has {} bytes; strata reads at most {MAX_FILE_BYTES} of a manifest or lockfile",
                text.len()
            ),
        });
    }
    let (mut depth, mut entries, mut line) = (0usize, 0usize, 1usize);
    // Quotes and comments only keep brackets in them from counting; both
    // end with the line, so that text cannot hide nesting behind a stray
    // apostrophe (a multi-line quoted scalar full of brackets may count
    // too much, never too little). In double quotes a backslash escapes
    // the next character, so `"\""` closes where the parsers close it.
    let (mut quote, mut comment, mut prev) = (None::<char>, false, '\n');
    let mut escape = false;
    for c in text.chars() {
        let after = std::mem::replace(&mut prev, c);
        if std::mem::take(&mut escape) && c != '\n' {
            continue;
        }
        match (c, quote) {
            ('\n', _) => {
                line += 1;
                entries += 1;
                comment = false;
                quote = None;
            }
            _ if comment => {}
            ('#', None) if after.is_whitespace() => comment = true,
            ('"' | '\'', None) => quote = Some(c),
            ('\\', Some('"')) => escape = true,
            (q, Some(open)) if q == open => quote = None,
            (_, Some(_)) => {}
            ('[' | '{', None) => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(ManifestError::Syntax {
                        location: at(line),
                        message: format!(
                            "collections nested more than {MAX_NESTING} deep; no manifest or lockfile needs that"
                        ),
                    });
                }
            }
            (']' | '}', None) => depth = depth.saturating_sub(1),
            (',', None) => entries += 1,
            _ => {}
        }
        if entries > MAX_ENTRIES {
            return Err(ManifestError::Syntax {
                location: at(line),
                message: format!(
                    "more than {MAX_ENTRIES} entries (lines and list items); a manifest or lockfile may have at most that many"
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        a: Option<Str>,
        b: Option<Vec<Str>>,
        c: Option<Spanned<u32>>,
        d: Option<OneOrMany>,
    }

    const TEXT: &str = "a: hello\nb:\n  - one\n  - \"two\"\nc: 7\nd: [x, y]\n";

    #[test]
    fn ordinals_locate_every_kind_of_value() {
        let doc: Doc = from_yaml(TEXT, FileId(3)).unwrap();
        let ordinal = |at: At| match at {
            At::Yaml { file, ordinal } => {
                assert_eq!(file, FileId(3));
                ordinal
            }
            other => panic!("not a yaml span: {other:?}"),
        };
        let b = doc.b.unwrap();
        let d = doc.d.unwrap();
        let cases = [
            (ordinal(doc.a.unwrap().at), (1, 4)),
            (ordinal(b[0].at), (3, 5)),
            (ordinal(b[1].at), (4, 5)),
            (ordinal(doc.c.unwrap().at), (5, 4)),
            (ordinal(d.0[0].at), (6, 5)),
            (ordinal(d.0[1].at), (6, 8)),
        ];
        for (ordinal, (line, column)) in cases {
            assert_eq!(
                locate::<Doc>(TEXT, ordinal),
                Some(Position { line, column }),
                "ordinal {ordinal}"
            );
        }
    }

    #[test]
    fn one_or_many_accepts_a_single_string() {
        let doc: Doc = from_yaml("d: only\n", FileId(0)).unwrap();
        let d = doc.d.unwrap();
        assert_eq!(d.0.len(), 1);
        assert_eq!(d.0[0].value, "only");
        let ordinal = match d.0[0].at {
            At::Yaml { ordinal, .. } => ordinal,
            _ => unreachable!(),
        };
        assert_eq!(
            locate::<Doc>("d: only\n", ordinal),
            Some(Position { line: 1, column: 4 })
        );
    }

    #[test]
    fn plain_scalars_keep_their_text() {
        let doc: Doc = from_yaml("a: 4.10\n", FileId(0)).unwrap();
        assert_eq!(doc.a.unwrap().value, "4.10");
    }

    #[test]
    fn errors_carry_positions_and_the_valid_fields() {
        let err = from_yaml::<Doc>("a: x\nzz: 1\n", FileId(0)).unwrap_err();
        let err = yaml_error(&err, Path::new("m.yaml"));
        assert_eq!(
            err.to_string(),
            "m.yaml:2:1: unknown field `zz`, expected one of `a`, `b`, `c`, `d`"
        );
        let err = from_yaml::<Doc>("b: notalist\n", FileId(0)).unwrap_err();
        let err = yaml_error(&err, Path::new("m.yaml"));
        assert_eq!(
            err.to_string(),
            "m.yaml:1:4: b: invalid type: string \"notalist\", expected a sequence"
        );
    }
}
