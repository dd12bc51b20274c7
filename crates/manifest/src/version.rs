//! Version templates and the values they are rendered from.
//!
//! A base's `version-prefix` (`8.6.<date:%Y%m%d>`) and a release's
//! `version-template` (`{ocp_major}{ocp_minor}.{rhel_major}{rhel_minor}.{base_date:%Y%m%d%H%M}-{serial}`)
//! are parsed when the manifest loads, so a typo fails early, and rendered by
//! pure functions given a date.
//!
//! Must not: read the clock. Every date comes from the caller (a
//! `SOURCE_DATE_EPOCH`, the base's build date), so that versions are
//! reproducible.

use std::fmt;

use serde::{Serialize, Serializer};

/// A UTC date and time, to the second. Built from Unix seconds or fields;
/// there is no "now".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UtcDateTime {
    year: i32,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
}

impl UtcDateTime {
    /// The date and time `secs` seconds after 1970-01-01T00:00:00Z.
    pub fn from_unix_seconds(secs: i64) -> Self {
        use chrono::{Datelike, Timelike};
        let t = chrono::DateTime::from_timestamp(secs, 0).unwrap_or_default();
        UtcDateTime {
            year: t.year(),
            month: t.month() as u8,
            day: t.day() as u8,
            hour: t.hour() as u8,
            minute: t.minute() as u8,
            second: t.second() as u8,
        }
    }

    /// An RFC 3339 date and time (`2026-10-15T00:00:00Z`, an offset or a
    /// fraction allowed), in UTC to the second; `None` for anything else.
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        let t = chrono::DateTime::parse_from_rfc3339(text).ok()?;
        Some(Self::from_unix_seconds(t.timestamp()))
    }

    /// A date and time from fields; `None` unless it exists in the calendar.
    pub fn new(year: i32, month: u8, day: u8, hour: u8, minute: u8, second: u8) -> Option<Self> {
        let valid = chrono::NaiveDate::from_ymd_opt(year, month.into(), day.into()).is_some()
            && hour < 24
            && minute < 60
            && second < 60;
        valid.then_some(UtcDateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
        })
    }

    /// `YYYY-MM-DDThh:mm:ssZ` (RFC 3339, UTC).
    pub fn rfc3339(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    pub fn year(&self) -> i32 {
        self.year
    }
    pub fn month(&self) -> u8 {
        self.month
    }
    pub fn day(&self) -> u8 {
        self.day
    }
    pub fn hour(&self) -> u8 {
        self.hour
    }
    pub fn minute(&self) -> u8 {
        self.minute
    }
    pub fn second(&self) -> u8 {
        self.second
    }

    /// Seconds since the Unix epoch.
    pub fn unix_seconds(&self) -> i64 {
        chrono::NaiveDate::from_ymd_opt(self.year, self.month.into(), self.day.into())
            .and_then(|d| d.and_hms_opt(self.hour.into(), self.minute.into(), self.second.into()))
            .map(|t| t.and_utc().timestamp())
            .expect("a UtcDateTime is a valid date")
    }

    fn render(&self, items: &[DateItem], out: &mut String) {
        use std::fmt::Write;
        for item in items {
            let _ = match item {
                DateItem::Literal(s) => write!(out, "{s}"),
                DateItem::Year => write!(out, "{:04}", self.year),
                DateItem::Month => write!(out, "{:02}", self.month),
                DateItem::Day => write!(out, "{:02}", self.day),
                DateItem::Hour => write!(out, "{:02}", self.hour),
                DateItem::Minute => write!(out, "{:02}", self.minute),
                DateItem::Second => write!(out, "{:02}", self.second),
            };
        }
    }
}

impl fmt::Display for UtcDateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum DateItem {
    Literal(String),
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

/// Parses a strftime-like format: `%Y %m %d %H %M %S %%`.
fn parse_date_format(fmt: &str) -> Result<Vec<DateItem>, String> {
    let mut items = Vec::new();
    let mut chars = fmt.chars();
    let mut literal = String::new();
    while let Some(c) = chars.next() {
        if c != '%' {
            literal.push(c);
            continue;
        }
        let item = match chars.next() {
            Some('Y') => DateItem::Year,
            Some('m') => DateItem::Month,
            Some('d') => DateItem::Day,
            Some('H') => DateItem::Hour,
            Some('M') => DateItem::Minute,
            Some('S') => DateItem::Second,
            Some('%') => {
                literal.push('%');
                continue;
            }
            Some(other) => {
                return Err(format!(
                    "`%{other}` is not a supported date field (use %Y %m %d %H %M %S)"
                ))
            }
            None => return Err("date format ends with a lone `%`".to_string()),
        };
        if !literal.is_empty() {
            items.push(DateItem::Literal(std::mem::take(&mut literal)));
        }
        items.push(item);
    }
    if !literal.is_empty() {
        items.push(DateItem::Literal(literal));
    }
    Ok(items)
}

fn check_literal(text: &str, allowed: &str) -> Result<(), String> {
    match text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || allowed.contains(*c)))
    {
        Some(c) => Err(format!(
            "`{c}` cannot appear in a version (letters, digits and `{allowed}` only)"
        )),
        None => Ok(()),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PrefixPart {
    Literal(String),
    Date(Vec<DateItem>),
}

/// A base's `version-prefix`: literal text with `<date:FORMAT>` fields.
/// Compose appends `-<serial>`, so the prefix itself cannot hold a `-`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionPrefix {
    template: String,
    parts: Vec<PrefixPart>,
}

impl VersionPrefix {
    pub fn parse(template: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('<') {
            let literal = &rest[..open];
            check_literal(literal, "._+~")?;
            if !literal.is_empty() {
                parts.push(PrefixPart::Literal(literal.to_string()));
            }
            let after = &rest[open + 1..];
            let Some(close) = after.find('>') else {
                return Err(format!("`<` without a closing `>` in `{template}`"));
            };
            let field = &after[..close];
            let Some(format) = field.strip_prefix("date:") else {
                return Err(format!(
                    "`<{field}>` is not a known field (the only one is `<date:FORMAT>`)"
                ));
            };
            let items = parse_date_format(format)?;
            for item in &items {
                if let DateItem::Literal(l) = item {
                    check_literal(l, "._+~")?;
                }
            }
            parts.push(PrefixPart::Date(items));
            rest = &after[close + 1..];
        }
        check_literal(rest, "._+~")?;
        if !rest.is_empty() {
            parts.push(PrefixPart::Literal(rest.to_string()));
        }
        if parts.is_empty() {
            return Err("the version prefix is empty".to_string());
        }
        Ok(VersionPrefix {
            template: template.to_string(),
            parts,
        })
    }

    /// The prefix for a build made at `date`: `8.6.<date:%Y%m%d>` gives `8.6.20261202`.
    pub fn render(&self, date: &UtcDateTime) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                PrefixPart::Literal(s) => out.push_str(s),
                PrefixPart::Date(items) => date.render(items, &mut out),
            }
        }
        out
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.template
    }
}

impl Serialize for VersionPrefix {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.template)
    }
}

/// An OpenShift release, `MAJOR.MINOR` (`4.13`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OcpRelease {
    pub major: u32,
    pub minor: u32,
}

impl OcpRelease {
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!("`{text}` is not MAJOR.MINOR (e.g. \"4.13\"; quote it, as 4.10 unquoted is a number)")
        };
        let (major, minor) = text.split_once('.').ok_or_else(bad)?;
        let number = |s: &str| -> Result<u32, String> {
            let digits = !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
            let canonical = s == "0" || !s.starts_with('0');
            if !(digits && canonical) {
                return Err(bad());
            }
            s.parse().map_err(|_| bad())
        };
        Ok(OcpRelease {
            major: number(major)?,
            minor: number(minor)?,
        })
    }
}

impl fmt::Display for OcpRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for OcpRelease {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What a derived version is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VersionParts {
    pub ocp: OcpRelease,
    /// From the base: RHEL 8.6 is major 8, minor 6.
    pub rhel_major: u32,
    pub rhel_minor: u32,
    /// The base's build date, so that one base gives one derived version.
    pub base_date: UtcDateTime,
    /// Counts derived builds of that version string.
    pub serial: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum TemplatePart {
    Literal(String),
    OcpMajor,
    OcpMinor,
    RhelMajor,
    RhelMinor,
    BaseDate(Vec<DateItem>),
    Serial,
}

/// A release's `version-template`: literal text with `{field}` fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionTemplate {
    template: String,
    parts: Vec<TemplatePart>,
}

impl VersionTemplate {
    /// The historic RHCOS scheme: `413.86.202612020930-0`.
    pub const DEFAULT: &'static str =
        "{ocp_major}{ocp_minor}.{rhel_major}{rhel_minor}.{base_date:%Y%m%d%H%M}-{serial}";

    pub fn parse(template: &str) -> Result<Self, String> {
        const FIELDS: &str =
            "{ocp_major} {ocp_minor} {rhel_major} {rhel_minor} {base_date:FORMAT} {serial}";
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            let literal = &rest[..open];
            check_literal(literal, "._+~-")?;
            if !literal.is_empty() {
                parts.push(TemplatePart::Literal(literal.to_string()));
            }
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else {
                return Err(format!("`{{` without a closing `}}` in `{template}`"));
            };
            let field = &after[..close];
            let part = match field {
                "ocp_major" => TemplatePart::OcpMajor,
                "ocp_minor" => TemplatePart::OcpMinor,
                "rhel_major" => TemplatePart::RhelMajor,
                "rhel_minor" => TemplatePart::RhelMinor,
                "serial" => TemplatePart::Serial,
                other => match other.strip_prefix("base_date:") {
                    Some(format) => {
                        let items = parse_date_format(format)?;
                        for item in &items {
                            if let DateItem::Literal(l) = item {
                                check_literal(l, "._+~-")?;
                            }
                        }
                        TemplatePart::BaseDate(items)
                    }
                    None => {
                        return Err(format!(
                            "`{{{other}}}` is not a known field (known: {FIELDS})"
                        ))
                    }
                },
            };
            parts.push(part);
            rest = &after[close + 1..];
        }
        check_literal(rest, "._+~-")?;
        if !rest.is_empty() {
            parts.push(TemplatePart::Literal(rest.to_string()));
        }
        if parts.is_empty() {
            return Err("the version template is empty".to_string());
        }
        Ok(VersionTemplate {
            template: template.to_string(),
            parts,
        })
    }

    /// The version these parts give.
    pub fn render(&self, v: &VersionParts) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                TemplatePart::Literal(s) => out.push_str(s),
                TemplatePart::OcpMajor => out.push_str(&v.ocp.major.to_string()),
                TemplatePart::OcpMinor => out.push_str(&v.ocp.minor.to_string()),
                TemplatePart::RhelMajor => out.push_str(&v.rhel_major.to_string()),
                TemplatePart::RhelMinor => out.push_str(&v.rhel_minor.to_string()),
                TemplatePart::BaseDate(items) => v.base_date.render(items, &mut out),
                TemplatePart::Serial => out.push_str(&v.serial.to_string()),
            }
        }
        out
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.template
    }
}

impl Default for VersionTemplate {
    fn default() -> Self {
        match VersionTemplate::parse(Self::DEFAULT) {
            Ok(t) => t,
            Err(e) => unreachable!("the default version template is valid: {e}"),
        }
    }
}

impl Serialize for VersionTemplate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.template)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(y: i32, mo: u8, d: u8, h: u8, mi: u8) -> UtcDateTime {
        UtcDateTime::new(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn unix_seconds_round_trip() {
        let cases = [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_652_140_800, "2022-05-10T00:00:00Z"),
            (1_796_204_999, "2026-12-02T09:49:59Z"),
            (-1, "1969-12-31T23:59:59Z"),
        ];
        for (secs, want) in cases {
            let t = UtcDateTime::from_unix_seconds(secs);
            assert_eq!(t.to_string(), want);
            assert_eq!(t.unix_seconds(), secs);
        }
        assert!(UtcDateTime::new(2026, 2, 29, 0, 0, 0).is_none());
        assert!(UtcDateTime::new(2028, 2, 29, 0, 0, 0).is_some());
        assert!(UtcDateTime::new(2026, 13, 1, 0, 0, 0).is_none());
    }

    #[test]
    fn version_prefix_renders() {
        let at = date(2026, 12, 2, 9, 30);
        let cases = [
            ("8.6.<date:%Y%m%d>", "8.6.20261202"),
            ("8.6.<date:%Y%m%d%H%M>", "8.6.202612020930"),
            ("8.6.<date:%Y.%m.%d>", "8.6.2026.12.02"),
            ("8.6", "8.6"),
            ("<date:%Y>_x", "2026_x"),
        ];
        for (template, want) in cases {
            assert_eq!(VersionPrefix::parse(template).unwrap().render(&at), want);
        }
    }

    #[test]
    fn version_prefix_rejects() {
        let cases = [
            (
                "8.6.<date:%Y%m%d",
                "`<` without a closing `>` in `8.6.<date:%Y%m%d`",
            ),
            (
                "8.6.<time:%H>",
                "`<time:%H>` is not a known field (the only one is `<date:FORMAT>`)",
            ),
            (
                "8.6.<date:%y>",
                "`%y` is not a supported date field (use %Y %m %d %H %M %S)",
            ),
            (
                "8.6-<date:%Y>",
                "`-` cannot appear in a version (letters, digits and `._+~` only)",
            ),
            (
                "8.6 <date:%Y>",
                "` ` cannot appear in a version (letters, digits and `._+~` only)",
            ),
            ("", "the version prefix is empty"),
        ];
        for (template, want) in cases {
            assert_eq!(
                VersionPrefix::parse(template).unwrap_err(),
                want,
                "{template}"
            );
        }
    }

    #[test]
    fn version_template_renders_the_rhcos_scheme() {
        let parts = VersionParts {
            ocp: OcpRelease::parse("4.13").unwrap(),
            rhel_major: 8,
            rhel_minor: 6,
            base_date: date(2026, 12, 2, 9, 30),
            serial: 0,
        };
        let cases = [
            (VersionTemplate::DEFAULT, "413.86.202612020930-0"),
            (
                "{ocp_major}.{ocp_minor}.{base_date:%Y%m%d}-{serial}",
                "4.13.20261202-0",
            ),
            ("rhcos-{rhel_major}.{rhel_minor}", "rhcos-8.6"),
        ];
        for (template, want) in cases {
            assert_eq!(
                VersionTemplate::parse(template).unwrap().render(&parts),
                want
            );
        }
        assert_eq!(
            VersionTemplate::default().render(&parts),
            "413.86.202612020930-0"
        );
        let later = VersionParts { serial: 3, ..parts };
        assert_eq!(
            VersionTemplate::default().render(&later),
            "413.86.202612020930-3"
        );
    }

    #[test]
    fn version_template_rejects() {
        let cases = [
            ("{ocp}", "`{ocp}` is not a known field (known: {ocp_major} {ocp_minor} {rhel_major} {rhel_minor} {base_date:FORMAT} {serial})"),
            ("{serial", "`{` without a closing `}` in `{serial`"),
            ("{base_date:%Q}", "`%Q` is not a supported date field (use %Y %m %d %H %M %S)"),
            ("a/{serial}", "`/` cannot appear in a version (letters, digits and `._+~-` only)"),
        ];
        for (template, want) in cases {
            assert_eq!(
                VersionTemplate::parse(template).unwrap_err(),
                want,
                "{template}"
            );
        }
    }

    #[test]
    fn ocp_release_table() {
        let ok = [("4.13", (4, 13)), ("4.10", (4, 10)), ("10.0", (10, 0))];
        for (text, (major, minor)) in ok {
            assert_eq!(OcpRelease::parse(text), Ok(OcpRelease { major, minor }));
            assert_eq!(OcpRelease::parse(text).unwrap().to_string(), text);
        }
        for bad in [
            "4", "4.", ".13", "4.13.1", "v4.13", "04.13", "4.013", "4.1x",
        ] {
            assert!(OcpRelease::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rfc3339_dates_parse_and_anything_else_does_not() {
        let t = UtcDateTime::parse_rfc3339("2026-10-15T02:00:00+02:00").unwrap();
        assert_eq!(t.rfc3339(), "2026-10-15T00:00:00Z");
        for bad in ["not-a-date", "2026-10-15", "2026-02-30T00:00:00Z", ""] {
            assert_eq!(UtcDateTime::parse_rfc3339(bad), None, "{bad}");
        }
    }
}
