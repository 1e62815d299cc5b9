//! Drawing the [`Model`]: the terminal screen (ratatui) and the plain-text frames of batch mode.
//!
//! The screen, top to bottom: a header (servers up and down, policies, totals, refresh
//! interval, sort order), the jobs table, the quota-rules pane and a footer with the keys. A
//! terminal too narrow for every column drops the least useful ones first (peers, the
//! sparkline, the wait p99, …); the job id and its priority go last.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::model::{Column, Health, JobRow, Model, RuleRow};
use iosets_types::PrioritySource;

/// The jobs table's columns in the order they are given up when the screen is too narrow:
/// the last first.
const KEEP_ORDER: [Column; 12] = [
    Column::Job,
    Column::Priority,
    Column::Source,
    Column::Set,
    Column::Write,
    Column::Read,
    Column::Queued,
    Column::InService,
    Column::WaitP99,
    Column::WaitedOn,
    Column::Trend,
    Column::Peers,
];

/// The widest sparkline, in cells (one cell per round).
const TREND_WIDTH: usize = 20;

/// The keys, as the footer lists them.
pub(crate) const KEYS: &str =
    "q/Esc quit  s sort column  S reverse  p pause  +/- interval  \u{2191}/\u{2193} PgUp/PgDn scroll";

/// A column's width on screen.
fn width(c: Column, model: &Model) -> u16 {
    match c {
        Column::Job => 10,
        Column::Set => 3,
        Column::Priority => 9,
        Column::Source => 7,
        Column::Read => 10,
        Column::Write => 11,
        Column::Trend => model.history_len.clamp(1, TREND_WIDTH) as u16,
        Column::Queued => 7,
        Column::InService => 6,
        Column::WaitP99 => 9,
        Column::WaitedOn => 16,
        Column::Peers => 5,
    }
}

/// The columns that fit in `room` cells (one cell between two columns), in display order.
fn fitting_columns(model: &Model, room: u16) -> Vec<Column> {
    let mut used = 0u16;
    let mut kept = Vec::new();
    for c in KEEP_ORDER {
        let w = width(c, model) + u16::from(!kept.is_empty());
        if used + w > room {
            break;
        }
        used += w;
        kept.push(c);
    }
    Column::ALL
        .into_iter()
        .filter(|c| kept.contains(c))
        .collect()
}

/// A priority in at most four decimals (`0.01`, `1`, `0.0015`), or in scientific notation when
/// that would hide it (`1.0e-5`).
fn priority(p: f64) -> String {
    if (0.001..1e6).contains(&p) {
        let s = format!("{p:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{p:.1e}")
    }
}

/// `v` MiB/s as a cell.
fn mib_s(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// A wait in microseconds, in the unit that reads best.
pub(crate) fn wait(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1}ms", us / 1e3)
    } else {
        format!("{us:.0}us")
    }
}

/// The last `width` values of `values` as a sparkline of block characters scaled to `max`
/// (a blank for zero, `▁` for the smallest non-zero values, `█` for `max`), newest at the
/// right, padded on the left while the history is short.
pub(crate) fn sparkline(values: &[f64], max: f64, width: usize) -> String {
    const BARS: [char; 8] = [
        '\u{2581}', '\u{2582}', '\u{2583}', '\u{2584}', '\u{2585}', '\u{2586}', '\u{2587}',
        '\u{2588}',
    ];
    let shown = &values[values.len().saturating_sub(width)..];
    let mut s = " ".repeat(width - shown.len());
    for v in shown {
        if *v <= 0.0 || max <= 0.0 {
            s.push(' ');
        } else {
            let level = ((v / max) * 8.0).ceil() as usize;
            s.push(BARS[level.clamp(1, 8) - 1]);
        }
    }
    s
}

/// Job `r`'s cell in column `c`.
fn cell(c: Column, r: &JobRow, model: &Model) -> String {
    match c {
        // The name its client told (`procname.uid`, not a 20-digit hash), else the id.
        Column::Job => r.name.clone().unwrap_or_else(|| r.job.to_string()),
        Column::Set => r.set.map_or("-".into(), |s| s.to_string()),
        Column::Priority => {
            let p = r.priority.map_or("-".into(), priority);
            if r.priority_differs {
                format!("{p}*")
            } else {
                p
            }
        }
        Column::Source => r.source.map_or("none", PrioritySource::as_str).to_string(),
        Column::Read => mib_s(r.read_mib_s),
        Column::Write => mib_s(r.write_mib_s),
        Column::Trend => sparkline(
            &model.history(r.job),
            model.history_max(),
            width(Column::Trend, model) as usize,
        ),
        Column::Queued => r.queued.to_string(),
        Column::InService => r.in_service.to_string(),
        Column::WaitP99 => r.wait_p99_us.map_or("-".into(), wait),
        Column::WaitedOn => r
            .waited_on()
            .map_or("-".into(), |(n, f)| format!("{n} {:.0}%", f * 100.0)),
        Column::Peers => r.peers.to_string(),
    }
}

/// The sort column's heading with its direction.
fn sort_label(model: &Model) -> String {
    let natural_down = !matches!(model.sort, Column::Job | Column::Set | Column::Source);
    let down = natural_down != model.reversed;
    format!(
        "{} {}",
        model.sort.title(),
        if down { '\u{2193}' } else { '\u{2191}' }
    )
}

/// The header's lines: totals, servers, sort order.
fn header_lines(model: &Model) -> Vec<Line<'static>> {
    let (up, down) = model.up_down();
    let t = model.totals();
    let policies = model.policies();
    let mixed = policies.len() > 1;
    let policies = policies
        .iter()
        .map(|(p, n)| {
            if mixed {
                format!("{p}\u{d7}{n}")
            } else {
                p.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut first =
        vec![
            Span::raw("iosets top  ").bold(),
            Span::styled(format!("servers {up} up"), Style::new().fg(Color::Green)),
            Span::raw(", "),
            Span::styled(
                format!("{down} down"),
                if down > 0 {
                    Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
                } else {
                    Style::new()
                },
            ),
            Span::raw(format!(
            "  policy {}  jobs {}  queued {}  in service {}  read {} write {} MiB/s  every {} s",
            if policies.is_empty() { "-".into() } else { policies },
            model.rows().len(),
            t.queued,
            t.in_service,
            mib_s(t.read_mib_s),
            mib_s(t.write_mib_s),
            model.interval_s,
        )),
        ];
    if model.paused {
        first.push(Span::styled(
            "  PAUSED",
            Style::new().fg(Color::Yellow).bold(),
        ));
    }
    let mut servers: Vec<Span<'static>> = Vec::new();
    for s in &model.servers {
        match &s.health {
            Health::Down(why) => servers.push(Span::styled(
                format!("{} DOWN ({why})  ", s.name),
                Style::new().fg(Color::Red),
            )),
            Health::Waiting => servers.push(Span::raw(format!("{} asking\u{2026}  ", s.name))),
            Health::Up if model.servers.len() <= 4 => {
                servers.push(Span::raw(format!("{} up  ", s.name)))
            }
            Health::Up => {}
        }
    }
    if servers.is_empty() {
        servers.push(Span::raw(format!("all {up} servers answer")));
    }
    let mut third = format!("sort {}", sort_label(model));
    if model.servers.len() > 1 {
        third.push_str("  wait p99: the largest server's (an upper bound)");
    }
    third.push_str(&format!(
        "  trend: R+W per round, full bar {} MiB/s",
        mib_s(Some(model.history_max()))
    ));
    let mut third = vec![Span::raw(third)];
    if let Some(n) = &model.note {
        third.push(Span::styled(
            format!("  {n}"),
            Style::new().fg(Color::Yellow),
        ));
    }
    vec![Line::from(first), Line::from(servers), Line::from(third)]
}

/// Draws the whole screen; returns how many job rows it had room for (a page, for PgUp/PgDn).
pub(crate) fn draw(frame: &mut Frame<'_>, model: &Model) -> usize {
    let area = frame.area();
    let rules = model.rules();
    let rules_height = if rules.is_empty() {
        3
    } else {
        (rules.len() as u16 + 3).min((area.height / 3).max(3))
    };
    let [head, jobs, rules_area, foot] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(3),
        Constraint::Length(rules_height),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header_lines(model)), head);
    let page = draw_jobs(frame, model, jobs);
    draw_rules(frame, model, rules_area);
    frame.render_widget(
        Paragraph::new(Line::from(KEYS)).style(Style::new().add_modifier(Modifier::REVERSED)),
        foot,
    );
    page
}

fn draw_jobs(frame: &mut Frame<'_>, model: &Model, area: Rect) -> usize {
    let columns = fitting_columns(model, area.width.saturating_sub(2));
    // Borders and the heading row.
    let page = area.height.saturating_sub(3) as usize;
    let rows = model.rows();
    let first = model.scroll.min(rows.len().saturating_sub(page));
    let shown = &rows[first..rows.len().min(first + page)];
    let title = if rows.is_empty() {
        " jobs: none yet ".to_string()
    } else {
        format!(
            " jobs {}\u{2013}{} of {} ",
            first + 1,
            first + shown.len(),
            rows.len()
        )
    };
    let heading = Row::new(columns.iter().map(|c| {
        let style = if *c == model.sort {
            Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        };
        Cell::from(c.title()).style(style)
    }));
    let body = shown.iter().map(|r| {
        Row::new(
            columns
                .iter()
                .map(|c| Cell::from(cell(*c, r, model)))
                .collect::<Vec<_>>(),
        )
    });
    let widths = columns.iter().map(|c| Constraint::Length(width(*c, model)));
    let table = Table::new(body, widths)
        .header(heading)
        .block(Block::bordered().title(title));
    frame.render_widget(table, area);
    page
}

fn rule_cells(r: &RuleRow, servers: usize) -> Vec<String> {
    let mut v = vec![
        if r.differs {
            format!("{}*", r.name)
        } else {
            r.name.clone()
        },
        r.matcher.clone(),
        r.limits.clone(),
        r.threads.map_or("-".into(), |t| t.to_string()),
        r.in_service.to_string(),
        r.held.to_string(),
        r.jobs.to_string(),
        format!("{:.1}", r.held_threads_s),
        format!("{:.1}", r.held_rate_s),
        r.top_1m
            .map_or("-".into(), |(job, s)| format!("{job} {s:.1}s")),
    ];
    if servers > 1 {
        v.push(format!("{}/{servers}", r.servers));
    }
    v
}

const RULE_TITLES: [&str; 11] = [
    "RULE",
    "MATCH",
    "LIMITS",
    "THREADS",
    "IN SVC",
    "HELD",
    "JOBS",
    "THR s",
    "RATE s",
    "TOP JOB 1M",
    "SERVERS",
];

fn draw_rules(frame: &mut Frame<'_>, model: &Model, area: Rect) {
    let rules = model.rules();
    let block = Block::bordered().title(" quota rules ");
    if rules.is_empty() {
        frame.render_widget(Paragraph::new("no quota rules").block(block), area);
        return;
    }
    let n = model.servers.len();
    // Who was held, and why (threads, rate, the top job), when there is room for it.
    let wide = area.width >= 120;
    let keep = |i: usize| (wide || !(7..10).contains(&i)) && (n > 1 || i != 10);
    let widths = [
        Constraint::Length(14),
        Constraint::Fill(2),
        Constraint::Fill(2),
        Constraint::Length(7),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(26),
        Constraint::Length(7),
    ];
    let widths: Vec<Constraint> = widths
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| keep(i))
        .map(|(_, w)| w)
        .collect();
    let titles: Vec<Cell<'_>> = RULE_TITLES
        .iter()
        .enumerate()
        .filter(|&(i, _)| keep(i))
        .map(|(_, t)| Cell::from(*t))
        .collect();
    let table = Table::new(
        rules.iter().map(|r| {
            Row::new(
                rule_cells(r, n)
                    .into_iter()
                    .enumerate()
                    .filter(|&(i, _)| keep(i))
                    .map(|(_, c)| Cell::from(c))
                    .collect::<Vec<_>>(),
            )
        }),
        widths,
    )
    .header(Row::new(titles).bold())
    .block(block);
    frame.render_widget(table, area);
}

/// One plain-text frame (batch mode): the header's lines, then every job (no sparkline) and
/// every rule as space-aligned columns, for scripts and logs.
pub(crate) fn text_frame(model: &Model) -> String {
    let mut out = String::new();
    for l in header_lines(model) {
        let text: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
        out.push_str(text.trim_end());
        out.push('\n');
    }
    let columns: Vec<Column> = Column::ALL
        .into_iter()
        .filter(|c| *c != Column::Trend)
        .collect();
    let mut table: Vec<Vec<String>> = vec![columns.iter().map(|c| c.title().to_string()).collect()];
    for r in model.rows() {
        table.push(columns.iter().map(|c| cell(*c, r, model)).collect());
    }
    out.push_str(&aligned(&table));
    if !model.rules().is_empty() {
        let n = model.servers.len();
        let mut table: Vec<Vec<String>> = vec![RULE_TITLES
            .iter()
            .take(if n > 1 { 11 } else { 10 })
            .map(|t| t.to_string())
            .collect()];
        table.extend(model.rules().iter().map(|r| rule_cells(r, n)));
        out.push_str(&aligned(&table));
    }
    out
}

/// Rows of cells as lines, each column as wide as its widest cell, two spaces apart.
fn aligned(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::super::model::fixtures::{job, rule, snapshot};
    use super::super::model::{Action, Snapshot};
    use super::*;

    const M: u64 = 1 << 20;

    /// Draws `model` on a `w`×`h` test terminal; returns the screen's lines and the page size.
    fn render(model: &Model, w: u16, h: u16) -> (Vec<String>, usize) {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let mut page = 0;
        term.draw(|f| page = draw(f, model)).unwrap();
        let buf = term.backend().buffer();
        let lines = (0..h)
            .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
            .collect();
        (lines, page)
    }

    /// The job ids in the table, top to bottom (rows whose first cell after the border is a
    /// number).
    fn job_order(lines: &[String]) -> Vec<u64> {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix('\u{2502}'))
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    }

    fn two_jobs() -> Vec<Result<Snapshot, String>> {
        vec![Ok(snapshot(
            "iosets",
            vec![
                job(11, Some(0.01), "hint", 0, 0),
                job(22, Some(1.0), "control", 0, 0),
            ],
            vec![rule("batch", "job={11}", 1, 3, &[11])],
        ))]
    }

    #[test]
    fn priorities_read_short() {
        let cases = [
            (1.0, "1"),
            (0.01, "0.01"),
            (0.1 + 0.2, "0.3"),
            (0.0015, "0.0015"),
        ];
        for (p, text) in cases {
            assert_eq!(priority(p), text);
        }
        assert_eq!(priority(1e-5), "1.0e-5");
        assert_eq!(priority(10f64.powi(-3)), "0.001");
    }

    #[test]
    fn jobs_show_their_set_priority_and_its_source() {
        let mut m = Model::new(&["127.0.0.1:7070".into()], 1.0, 30);
        m.ingest_round(Duration::from_secs(1), two_jobs());
        let (lines, _) = render(&m, 120, 30);
        let screen = lines.join("\n");
        let row = |job: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(&format!("\u{2502}{job} ")))
                .unwrap_or_else(|| panic!("no row of job {job}:\n{screen}"))
                .clone()
        };
        let r11 = row("11");
        let cells: Vec<&str> = r11.trim_matches('\u{2502}').split_whitespace().collect();
        assert_eq!(&cells[..4], ["11", "2", "0.01", "hint"], "{r11}");
        let r22 = row("22");
        let cells: Vec<&str> = r22.trim_matches('\u{2502}').split_whitespace().collect();
        assert_eq!(&cells[..4], ["22", "0", "1", "control"], "{r22}");
        assert!(lines[0].contains("servers 1 up, 0 down"), "{screen}");
        assert!(lines[0].contains("policy iosets"), "{screen}");
        assert!(screen.contains("batch"), "the rules pane: {screen}");
        assert!(lines.last().unwrap().contains("q/Esc quit"), "{screen}");
    }

    #[test]
    fn the_cause_a_job_waited_on_most_is_summed_over_servers() {
        let with_waits = |share: u64, exclusivity: u64| {
            let mut j = job(11, Some(0.01), "hint", 0, 0);
            j.wait_causes.share.ns = share;
            j.wait_causes.exclusivity.ns = exclusivity;
            j.wait_causes.wait_ns = share + exclusivity;
            j
        };
        let mut m = Model::new(&["a:1".into(), "b:2".into()], 1.0, 30);
        // Server a: mostly exclusivity; server b: more share; together share is 70 %.
        m.ingest_round(
            Duration::from_secs(1),
            vec![
                Ok(snapshot("iosets", vec![with_waits(100, 300)], vec![])),
                Ok(snapshot("iosets", vec![with_waits(600, 0)], vec![])),
            ],
        );
        let (lines, _) = render(&m, 160, 30);
        let screen = lines.join("\n");
        assert!(screen.contains("WAITED ON"), "{screen}");
        let row = lines
            .iter()
            .find(|l| l.starts_with("\u{2502}11 "))
            .unwrap_or_else(|| panic!("no row of job 11:\n{screen}"));
        assert!(row.contains("share 70%"), "{row}");
    }

    #[test]
    fn sorting_reorders_the_rows_on_screen() {
        let mut m = Model::new(&["a".into()], 1.0, 30);
        m.ingest_round(Duration::from_secs(1), two_jobs());
        assert_eq!(job_order(&render(&m, 120, 30).0), [11, 22]);
        m.act(Action::NextSort);
        let (lines, _) = render(&m, 120, 30);
        assert_eq!(job_order(&lines), [22, 11], "set 0 first");
        assert!(lines[2].contains("sort SET \u{2191}"), "{}", lines[2]);
        m.act(Action::ReverseSort);
        assert_eq!(job_order(&render(&m, 120, 30).0), [11, 22]);
    }

    #[test]
    fn a_down_server_is_named_with_its_reason_and_the_others_still_show() {
        let mut m = Model::new(&["up:1".into(), "gone:2".into()], 1.0, 30);
        m.ingest_round(
            Duration::from_secs(1),
            vec![
                two_jobs().remove(0),
                Err("cannot connect to gone:2: connection refused".into()),
            ],
        );
        let (lines, _) = render(&m, 140, 30);
        assert!(lines[0].contains("servers 1 up, 1 down"), "{}", lines[0]);
        assert!(
            lines[1].contains("gone:2 DOWN (cannot connect"),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains("upper bound"), "{}", lines[2]);
        assert_eq!(job_order(&lines), [11, 22]);
    }

    #[test]
    fn the_sparkline_follows_the_bandwidth() {
        let mut m = Model::new(&["a".into()], 1.0, 8);
        // Job 5 writes 0, 8, 1, 0 MiB in successive one-second rounds; job 6 a steady 2 MiB.
        let writes = [0, 0, 8, 9, 9];
        for (t, w) in writes.iter().enumerate() {
            let jobs = vec![
                job(5, None, "none", 0, w * M),
                job(6, None, "none", 0, 2 * t as u64 * M),
            ];
            m.ingest_round(
                Duration::from_secs(t as u64),
                vec![Ok(snapshot("wfq", jobs, vec![]))],
            );
        }
        assert_eq!(m.history(5), [0.0, 8.0, 1.0, 0.0]);
        assert_eq!(sparkline(&m.history(5), 8.0, 8), "     \u{2588}\u{2581} ");
        assert_eq!(
            sparkline(&m.history(6), 8.0, 8),
            "    \u{2582}\u{2582}\u{2582}\u{2582}"
        );
        let (lines, _) = render(&m, 120, 20);
        let row = lines.iter().find(|l| l.starts_with("\u{2502}5 ")).unwrap();
        assert!(row.contains("     \u{2588}\u{2581} "), "{row}");
        assert!(lines[2].contains("full bar 8.0 MiB/s"), "{}", lines[2]);
    }

    #[test]
    fn a_long_job_list_scrolls() {
        let mut m = Model::new(&["a".into()], 1.0, 8);
        let jobs = (1..=100).map(|j| job(j, None, "none", 0, 0)).collect();
        m.ingest_round(
            Duration::from_secs(1),
            vec![Ok(snapshot("wfq", jobs, vec![]))],
        );
        let (lines, page) = render(&m, 100, 24);
        // 24 lines: header 3, rules 3, footer 1, borders 2 and the heading 1 leave 14 rows.
        assert_eq!(page, 14);
        assert_eq!(job_order(&lines), (1..=14).collect::<Vec<_>>());
        assert!(lines[3].contains("jobs 1\u{2013}14 of 100"), "{}", lines[3]);
        m.page = page;
        m.act(Action::PageDown);
        m.act(Action::Down);
        let (lines, _) = render(&m, 100, 24);
        assert_eq!(job_order(&lines), (16..=29).collect::<Vec<_>>());
        for _ in 0..20 {
            m.act(Action::PageDown);
        }
        let (lines, _) = render(&m, 100, 24);
        assert_eq!(
            job_order(&lines),
            (87..=100).collect::<Vec<_>>(),
            "the last page is full"
        );
    }

    #[test]
    fn a_narrow_terminal_keeps_the_job_and_its_priority() {
        let mut m = Model::new(&["a".into()], 1.0, 30);
        m.ingest_round(Duration::from_secs(1), two_jobs());
        let (lines, _) = render(&m, 40, 20);
        let heading = lines.iter().find(|l| l.starts_with("\u{2502}JOB")).unwrap();
        assert!(
            heading.contains("PRIORITY") && heading.contains("SOURCE"),
            "{heading}"
        );
        assert!(
            !heading.contains("PEERS") && !heading.contains("TREND"),
            "{heading}"
        );
        assert_eq!(job_order(&lines), [11, 22]);
        // Smaller than anything sensible: drawn without a panic.
        for (w, h) in [(1, 1), (10, 3), (20, 8)] {
            render(&m, w, h);
        }
    }

    #[test]
    fn a_text_frame_needs_no_terminal() {
        let mut m = Model::new(&["a".into()], 1.0, 30);
        m.ingest_round(Duration::from_secs(1), two_jobs());
        let text = text_frame(&m);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("iosets top  servers 1 up, 0 down"),
            "{text}"
        );
        let heading: Vec<&str> = lines[3].split("  ").filter(|c| !c.is_empty()).collect();
        assert_eq!(heading[..4], ["JOB", "SET", "PRIORITY", "SOURCE"], "{text}");
        let row: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(row[..4], ["11", "2", "0.01", "hint"], "{text}");
        assert!(lines[6].starts_with("RULE"), "{text}");
        assert!(lines[7].starts_with("batch"), "{text}");
    }
}
