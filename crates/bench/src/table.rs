//! The one table a bench run ends with: for each target of issue 22,
//! strata's figure, the baseline's, their ratio, the target and whether it
//! is met, with each side's peak memory. docs/bench.md says how to read it.

use crate::measure::Run;

/// The 1 GiB every stage must stay under at realistic scale.
pub const MEMORY_LIMIT: u64 = 1 << 30;

/// What a ratio must be for its line to be met.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    AtLeast(f64),
    AtMost(f64),
    /// A line for information: no target.
    None,
}

/// One figure with its unit: seconds, a ratio, s/GB.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub value: f64,
    pub unit: &'static str,
}

impl Figure {
    pub fn secs(run: &Run) -> Figure {
        Figure {
            value: run.secs(),
            unit: "s",
        }
    }

    pub fn of(value: f64, unit: &'static str) -> Figure {
        Figure { value, unit }
    }
}

#[derive(Clone, Debug)]
pub struct Line {
    pub what: String,
    pub strata: Option<Figure>,
    pub baseline: Option<Figure>,
    pub ratio: Option<f64>,
    /// How the ratio is formed, e.g. `base/strata`.
    pub ratio_of: &'static str,
    pub goal: Goal,
    pub strata_rss: Option<u64>,
    pub baseline_rss: Option<u64>,
    /// Why a line has no figures (a step that failed).
    pub note: Option<String>,
}

impl Line {
    pub fn new(what: impl Into<String>) -> Line {
        Line {
            what: what.into(),
            strata: None,
            baseline: None,
            ratio: None,
            ratio_of: "",
            goal: Goal::None,
            strata_rss: None,
            baseline_rss: None,
            note: None,
        }
    }

    /// Two timed sides; the ratio is baseline / strata (above 1: strata is
    /// faster).
    pub fn faster(what: impl Into<String>, strata: &Run, baseline: &Run, goal: Goal) -> Line {
        Line {
            strata: Some(Figure::secs(strata)),
            baseline: Some(Figure::secs(baseline)),
            ratio: Some(baseline.secs() / strata.secs()),
            ratio_of: "base/strata",
            goal,
            strata_rss: Some(strata.rss).filter(|r| *r > 0),
            baseline_rss: Some(baseline.rss).filter(|r| *r > 0),
            ..Line::new(what)
        }
    }

    /// Two timed sides; the ratio is strata / baseline (below 1: strata's
    /// side takes less).
    pub fn share(what: impl Into<String>, strata: &Run, baseline: &Run, goal: Goal) -> Line {
        Line {
            ratio: Some(strata.secs() / baseline.secs()),
            ratio_of: "strata/base",
            ..Line::faster(what, strata, baseline, goal)
        }
    }

    pub fn failed(what: impl Into<String>, why: String, goal: Goal) -> Line {
        Line {
            goal,
            note: Some(why),
            ..Line::new(what)
        }
    }

    fn verdict(&self) -> &'static str {
        match (self.goal, self.ratio) {
            (_, None) if self.note.is_some() => "FAILED",
            (Goal::None, _) | (_, None) => "-",
            (Goal::AtLeast(t), Some(r)) if r >= t => "met",
            (Goal::AtMost(t), Some(r)) if r <= t => "met",
            _ => "behind",
        }
    }
}

fn figure(f: &Option<Figure>) -> String {
    match f {
        Some(f) => format!("{:.2} {}", f.value, f.unit),
        None => "-".into(),
    }
}

fn rss(r: Option<u64>) -> String {
    match r {
        Some(b) => format!("{:.0} MiB", b as f64 / 1_048_576.0),
        None => "-".into(),
    }
}

fn goal(g: Goal) -> String {
    match g {
        Goal::AtLeast(t) => format!(">= {t}x"),
        Goal::AtMost(t) => format!("<= {t}x"),
        Goal::None => "-".into(),
    }
}

/// Prints `lines` as one Markdown table on stdout, with a last line for
/// the memory target: the largest peak of strata's stages.
pub fn print(title: &str, lines: &[Line]) {
    let mut rows: Vec<[String; 8]> = lines
        .iter()
        .map(|l| {
            [
                l.what.clone(),
                figure(&l.strata),
                figure(&l.baseline),
                match l.ratio {
                    Some(r) => format!("{r:.2}x {}", l.ratio_of),
                    None => l.note.clone().unwrap_or_else(|| "-".into()),
                },
                goal(l.goal),
                l.verdict().into(),
                rss(l.strata_rss),
                rss(l.baseline_rss),
            ]
        })
        .collect();
    if let Some(peak) = lines
        .iter()
        .filter(|l| l.strata_rss.is_some())
        .max_by_key(|l| l.strata_rss)
    {
        let value = peak.strata_rss.unwrap_or(0);
        rows.push([
            format!("peak memory of strata's stages (largest: {})", peak.what),
            rss(Some(value)),
            "-".into(),
            format!("{:.2}x of 1 GiB", value as f64 / MEMORY_LIMIT as f64),
            "<= 1x".into(),
            if value <= MEMORY_LIMIT {
                "met"
            } else {
                "behind"
            }
            .into(),
            rss(Some(value)),
            "-".into(),
        ]);
    }
    let header = [
        "line",
        "strata",
        "baseline",
        "ratio",
        "target",
        "met",
        "strata RSS",
        "baseline RSS",
    ];
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    println!();
    println!("{title}");
    println!();
    line(&header);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(&rule.iter().map(String::as_str).collect::<Vec<_>>());
    for r in &rows {
        line(&r.iter().map(String::as_str).collect::<Vec<_>>());
    }
}

/// A failure's first line, cut to 60 characters, for a FAILED line.
pub fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(60)
        .collect()
}

/// Bytes as MiB, for a figure.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}
