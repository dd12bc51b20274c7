//! dnf `.repo` files (INI), parsed by hand so that every value keeps its line
//! and column.
//!
//! The accepted syntax is what dnf accepts in practice: `[id]` sections,
//! `key=value` lines, continuation lines indented under a key (for lists of
//! URLs), and `#` or `;` comment lines.
//!
//! Must not: interpret keys or substitute variables. This module only splits
//! text into sections and values; `repo` decides what the keys mean, and the
//! loader substitutes `$releasever` once the merged manifest says what it is.

use crate::error::Position;

/// One `[id]` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Section {
    pub(crate) id: String,
    pub(crate) id_at: Position,
    pub(crate) entries: Vec<Entry>,
}

/// One `key=value`, with its continuation lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) key_at: Position,
    /// The value on the key's line, then each continuation line, trimmed,
    /// each with where it starts. Empty parts are dropped.
    pub(crate) parts: Vec<(String, Position)>,
}

impl Entry {
    /// The whole value, its lines joined by spaces, and where it starts (the
    /// key's position when the value is empty).
    pub(crate) fn joined(&self) -> (String, Position) {
        let text = self
            .parts
            .iter()
            .map(|(p, _)| p.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        let at = self.parts.first().map_or(self.key_at, |(_, at)| *at);
        (text, at)
    }

    /// The value as a list: split on whitespace and commas across lines.
    pub(crate) fn items(&self) -> Vec<(String, Position)> {
        let mut items = Vec::new();
        for (part, at) in &self.parts {
            let mut current = String::new();
            let mut start = at.column;
            for (column, c) in (at.column..).zip(part.chars()) {
                if c.is_whitespace() || c == ',' {
                    if !current.is_empty() {
                        items.push((
                            std::mem::take(&mut current),
                            Position {
                                line: at.line,
                                column: start,
                            },
                        ));
                    }
                } else {
                    if current.is_empty() {
                        start = column;
                    }
                    current.push(c);
                }
            }
            if !current.is_empty() {
                items.push((
                    current,
                    Position {
                        line: at.line,
                        column: start,
                    },
                ));
            }
        }
        items
    }
}

/// A line that is not INI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) at: Position,
    pub(crate) message: String,
}

fn pos(line: usize, column: usize) -> Position {
    Position::new(line, column)
}

/// Splits a `.repo` file into sections.
pub(crate) fn parse(text: &str) -> Result<Vec<Section>, SyntaxError> {
    let mut sections: Vec<Section> = Vec::new();
    // Whether the previous line can be continued (a key line or a
    // continuation); blank and comment lines end a value.
    let mut continuable = false;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim();
        let indent = line.chars().take_while(|c| c.is_whitespace()).count();
        let at = pos(number, indent + 1);
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continuable = continuable && !trimmed.is_empty() && indent > 0;
            continue;
        }
        if indent > 0 && continuable {
            if let Some(entry) = sections.last_mut().and_then(|s| s.entries.last_mut()) {
                entry.parts.push((trimmed.to_string(), at));
                continue;
            }
        }
        if let Some(rest) = trimmed.strip_prefix('[') {
            let Some(id) = rest.strip_suffix(']') else {
                return Err(SyntaxError {
                    at,
                    message: format!("section header `{trimmed}` does not end with `]`"),
                });
            };
            let id = id.trim();
            if id.is_empty() {
                return Err(SyntaxError {
                    at,
                    message: "empty section name `[]`".to_string(),
                });
            }
            if let Some(first) = sections.iter().find(|s| s.id == id) {
                return Err(SyntaxError {
                    at,
                    message: format!(
                        "repo `[{id}]` is defined twice (first at line {})",
                        first.id_at.line
                    ),
                });
            }
            let id_column = indent + 1 + 1 + rest.chars().take_while(|c| c.is_whitespace()).count();
            sections.push(Section {
                id: id.to_string(),
                id_at: pos(number, id_column),
                entries: Vec::new(),
            });
            continuable = false;
            continue;
        }
        let Some((key, value)) = trimmed.split_once('=') else {
            return Err(SyntaxError {
                at,
                message: format!(
                    "expected `[repo-id]`, `key=value` or a comment, found `{trimmed}`"
                ),
            });
        };
        let key = key.trim();
        let Some(section) = sections.last_mut() else {
            return Err(SyntaxError {
                at,
                message: format!("`{key}=` comes before any `[repo-id]` section"),
            });
        };
        if key.is_empty() {
            return Err(SyntaxError {
                at,
                message: "`=` without a key".to_string(),
            });
        }
        if let Some(first) = section.entries.iter().find(|e| e.key == key) {
            return Err(SyntaxError {
                at,
                message: format!(
                    "`{key}` is set twice in `[{}]` (first at line {})",
                    section.id, first.key_at.line
                ),
            });
        }
        let value_leading = value.chars().take_while(|c| c.is_whitespace()).count();
        let before_value = trimmed
            .split_once('=')
            .map_or(0, |(k, _)| k.chars().count())
            + 1;
        let value = value.trim();
        let mut parts = Vec::new();
        if !value.is_empty() {
            parts.push((
                value.to_string(),
                pos(number, indent + before_value + value_leading + 1),
            ));
        }
        section.entries.push(Entry {
            key: key.to_string(),
            key_at: at,
            parts,
        });
        continuable = true;
    }
    Ok(sections)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REDHAT_REPO: &str = "\
# Managed by subscription-manager
[rhel-8-for-x86_64-baseos-eus-rpms]
name = Red Hat Enterprise Linux 8 for x86_64 - BaseOS - Extended Update Support (RPMs)
baseurl = https://cdn.redhat.com/content/eus/rhel8/$releasever/x86_64/baseos/os
enabled = 1
gpgcheck = 1
gpgkey = file:///etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release
sslverify = 1

; second repo
[mirror]
baseurl=http://a.example/os
  http://b.example/os
gpgkey=file:///k1, file:///k2
";

    #[test]
    fn parses_sections_values_and_positions() {
        let sections = parse(REDHAT_REPO).unwrap();
        assert_eq!(sections.len(), 2);
        let eus = &sections[0];
        assert_eq!(eus.id, "rhel-8-for-x86_64-baseos-eus-rpms");
        assert_eq!(eus.id_at, pos(2, 2));
        let baseurl = eus.entries.iter().find(|e| e.key == "baseurl").unwrap();
        assert_eq!(
            baseurl.joined(),
            (
                "https://cdn.redhat.com/content/eus/rhel8/$releasever/x86_64/baseos/os".to_string(),
                pos(4, 11)
            )
        );
        let mirror = &sections[1];
        let urls = mirror.entries[0].items();
        assert_eq!(
            urls,
            vec![
                ("http://a.example/os".to_string(), pos(12, 9)),
                ("http://b.example/os".to_string(), pos(13, 3)),
            ]
        );
        let keys = mirror.entries[1].items();
        assert_eq!(
            keys,
            vec![
                ("file:///k1".to_string(), pos(14, 8)),
                ("file:///k2".to_string(), pos(14, 20)),
            ]
        );
    }

    #[test]
    fn bad_lines_are_reported_with_their_position() {
        let cases = [
            (
                "baseurl=x\n",
                pos(1, 1),
                "`baseurl=` comes before any `[repo-id]` section",
            ),
            (
                "[a]\nnonsense\n",
                pos(2, 1),
                "expected `[repo-id]`, `key=value` or a comment, found `nonsense`",
            ),
            (
                "[a\n",
                pos(1, 1),
                "section header `[a` does not end with `]`",
            ),
            ("[]\n", pos(1, 1), "empty section name `[]`"),
            (
                "[a]\n[b]\n[a]\n",
                pos(3, 1),
                "repo `[a]` is defined twice (first at line 1)",
            ),
            (
                "[a]\nname=x\n  name=y\n\n  z\n",
                pos(5, 3),
                "expected `[repo-id]`, `key=value` or a comment, found `z`",
            ),
            (
                "[a]\nname=x\nname=y\n",
                pos(3, 1),
                "`name` is set twice in `[a]` (first at line 2)",
            ),
            ("[a]\n=x\n", pos(2, 1), "`=` without a key"),
        ];
        for (text, at, message) in cases {
            assert_eq!(
                parse(text),
                Err(SyntaxError {
                    at,
                    message: message.to_string()
                }),
                "{text:?}"
            );
        }
    }
}
