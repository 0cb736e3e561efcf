//! String preparation as OpenLDAP slapd 2.5 does it (its `UTF8StringNormalize` over
//! liblunicode's `UTF8bvnormalize`), not RFC 4518's: values slapd keeps apart must stay apart
//! here (`Groß` and `Gross` are two values of one attribute), or a load or a replicated entry
//! silently keeps one of them.
//!
//! 1. Case folding (caseIgnore rules only), per code point: ASCII by `tolower`, every other
//!    code point by its *simple* lowercase mapping, one code point to one (İ → i, Σ → σ; ß and
//!    ς stay).
//! 2. NFKC over every non-ASCII stretch (with the ASCII character before it), after folding and
//!    with no folding after it: ㎒ becomes `MHz` even under caseIgnore.
//! 3. Spaces: only U+0020 (after NFKC, so NBSP and U+3000 too): leading and trailing ones
//!    trimmed, inner runs collapsed to one; a value of only spaces becomes one space.
//! 4. Nothing is mapped to nothing: soft hyphen, zero-width space and control characters stay;
//!    TAB, LF and CR are not spaces.
//!
//! Known difference: slapd's Unicode tables are older than Rust's, so characters assigned (or
//! given a case mapping) since then fold and compose here and stay as they are in slapd
//! (docs/compatibility.md).
//!
//! The ASCII and Latin-1 fast paths matter: the loader runs this on millions of values.

use unicode_normalization::UnicodeNormalization;

/// Prepares `value` into `output` (see the module documentation): optionally case folded,
/// NFKC, then leading/trailing spaces removed and inner space runs collapsed to one space. A
/// value of only spaces becomes one space (so it stays distinguishable from an empty value).
pub fn prepare_string(value: &str, case_fold: bool, output: &mut String) {
    output.clear();
    if value.is_ascii() {
        prepare_ascii(value.as_bytes(), case_fold, output);
    } else {
        prepare_unicode(value, case_fold, output);
    }
    if output.is_empty() && !value.is_empty() {
        output.push(' ');
    }
}

fn prepare_ascii(bytes: &[u8], case_fold: bool, output: &mut String) {
    let mut prepared = std::mem::take(output).into_bytes();
    prepare_ascii_bytes(bytes, case_fold, &mut prepared);
    *output = String::from_utf8(prepared).expect("ASCII preparation yields ASCII");
}

/// The ASCII case of `prepare_string`, on bytes (the normalizers return bytes, so this skips a
/// UTF-8 round trip). `output` is appended to; an all-space value yields one space.
pub(crate) fn prepare_ascii_bytes(bytes: &[u8], case_fold: bool, output: &mut Vec<u8>) {
    debug_assert!(bytes.is_ascii());
    let start = output.len();
    let mut pending_space = false;
    for &byte in bytes {
        if byte == b' ' {
            pending_space = output.len() > start;
            continue;
        }
        if pending_space {
            output.push(b' ');
            pending_space = false;
        }
        output.push(if case_fold {
            byte.to_ascii_lowercase()
        } else {
            byte
        });
    }
    if output.len() == start && !bytes.is_empty() {
        output.push(b' ');
    }
}

/// Whether `value` may prepare differently under the previous (RFC 4518, full case folding)
/// preparation than under this one: values with a non-ASCII byte or an ASCII control
/// character (which RFC 4518 mapped to nothing or to a space). Every other value prepares the
/// same under both, which is what lets a store of the previous format be upgraded in place.
pub fn may_prepare_differently_than_rfc4518(value: &[u8]) -> bool {
    value
        .iter()
        .any(|byte| !byte.is_ascii() || byte.is_ascii_control())
}

/// Whether `value` prepares to something that starts (ends) with a space before spaces are
/// trimmed: its first (last) character is a space or one NFKC makes start (end) with one
/// (NBSP, U+3000, ¨). For substring assertion components, whose edge spaces slapd keeps.
pub(crate) fn edge_spaces(value: &str) -> (bool, bool) {
    let leading = value
        .chars()
        .next()
        .is_some_and(|first| std::iter::once(first).nfkc().next() == Some(' '));
    let trailing = value
        .chars()
        .next_back()
        .is_some_and(|last| std::iter::once(last).nfkc().last() == Some(' '));
    (leading, trailing)
}

/// The simple (one code point to one) lowercase mapping slapd's `uctolower` applies; Rust's
/// `char::to_lowercase` is the full mapping, which differs only for U+0130 (İ → "i̇").
fn simple_lowercase(character: char) -> char {
    if character.is_ascii() {
        return character.to_ascii_lowercase();
    }
    if character == '\u{130}' {
        return 'i';
    }
    let mut lowered = character.to_lowercase();
    match (lowered.next(), lowered.next()) {
        (Some(single), None) => single,
        _ => character,
    }
}

/// Collapses space runs while characters are appended: leading spaces dropped, inner runs
/// written as one space when the next non-space arrives (so trailing spaces never appear).
struct SpaceCollapser {
    pending_space: bool,
}

impl SpaceCollapser {
    fn push(&mut self, character: char, output: &mut String) {
        if character == ' ' {
            self.pending_space = !output.is_empty();
            return;
        }
        if self.pending_space {
            output.push(' ');
            self.pending_space = false;
        }
        output.push(character);
    }
}

/// Mostly-ASCII text with some other characters, segmented as slapd does: ASCII characters not
/// followed by a non-ASCII one go straight through; every other stretch (a non-ASCII run with
/// the ASCII character before it, which a combining mark may compose with) goes through the
/// fold/NFKC pipeline. Equal to running the pipeline on the whole string (see the proptest).
fn prepare_unicode(value: &str, case_fold: bool, output: &mut String) {
    let bytes = value.as_bytes();
    let mut collapser = SpaceCollapser {
        pending_space: false,
    };
    let is_boundary = |position: usize| {
        bytes[position].is_ascii() && bytes.get(position + 1).is_none_or(|next| next.is_ascii())
    };
    let mut position = 0;
    while position < bytes.len() {
        if is_boundary(position) {
            let byte = bytes[position];
            let mapped = if case_fold {
                byte.to_ascii_lowercase()
            } else {
                byte
            };
            collapser.push(mapped as char, output);
            position += 1;
            continue;
        }
        let start = position;
        position += 1;
        while position < bytes.len() && !is_boundary(position) {
            position += 1;
        }
        // `start` is an ASCII byte or a character start, `position` an ASCII byte or the end:
        // both are character boundaries.
        let stretch = &value[start..position];
        if !prepare_latin1_letters(stretch, case_fold, &mut collapser, output) {
            prepare_unicode_pipeline(stretch, case_fold, &mut collapser, output);
        }
    }
}

/// A Latin-1 letter (U+00C0..U+00FF bar × and ÷): NFKC-stable, never the second character of
/// a composition, and simply lowercased by ASCII's rule moved up by 0xC0 - 0x40 (its uppercase
/// U+00C0..U+00DE, bar ×, lowercases to the character 0x20 above it; ß and ÿ are lowercase).
fn is_latin1_letter(character: char) -> bool {
    ('\u{C0}'..='\u{FF}').contains(&character) && character != '\u{D7}' && character != '\u{F7}'
}

/// The common stretch of European names and places (`Kraków`, `Müller`, `Straße`): only ASCII
/// and Latin-1 letters, followed by ASCII or the end, so no character can compose with a
/// neighbour; prepared character by character (the full pipeline costs far more per value).
/// False, writing nothing, when the stretch holds anything else.
fn prepare_latin1_letters(
    stretch: &str,
    case_fold: bool,
    collapser: &mut SpaceCollapser,
    output: &mut String,
) -> bool {
    if !stretch
        .chars()
        .all(|character| character.is_ascii() || is_latin1_letter(character))
    {
        return false;
    }
    for character in stretch.chars() {
        let folded = match character {
            'A'..='Z' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{DE}' if case_fold => {
                char::from_u32(character as u32 + 0x20).expect("a Latin-1 letter")
            }
            other => other,
        };
        collapser.push(folded, output);
    }
    true
}

/// Optional simple lowercase per code point, then NFKC, streamed through chained iterators
/// without intermediate strings.
fn prepare_unicode_pipeline(
    value: &str,
    case_fold: bool,
    collapser: &mut SpaceCollapser,
    output: &mut String,
) {
    if case_fold {
        for character in value.chars().map(simple_lowercase).nfkc() {
            collapser.push(character, output);
        }
    } else {
        for character in value.chars().nfkc() {
            collapser.push(character, output);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(value: &str, fold: bool) -> String {
        let mut output = String::new();
        prepare_string(value, fold, &mut output);
        output
    }

    #[test]
    fn ascii_spaces_are_trimmed_and_collapsed() {
        assert_eq!(prepared("  John   Smith  ", true), "john smith");
        assert_eq!(prepared("   ", true), " ");
        assert_eq!(prepared("", true), "");
    }

    #[test]
    fn only_the_ascii_space_is_a_space_and_nothing_maps_to_nothing() {
        assert_eq!(prepared("John\tSmith", false), "John\tSmith");
        assert_eq!(prepared("a\nb\r", true), "a\nb\r");
        assert_eq!(prepared("a\u{1}b", true), "a\u{1}b");
        assert_eq!(prepared("so\u{AD}ft", true), "so\u{AD}ft");
        assert_eq!(prepared("a\u{200B}b", true), "a\u{200B}b");
        // NFKC makes NBSP and the ideographic space spaces, which then collapse.
        assert_eq!(prepared("a\u{00A0}\u{3000}b", true), "a b");
        assert_eq!(prepared("\u{00A0}", true), " ");
    }

    #[test]
    fn case_folding_is_the_simple_lowercase_before_nfkc() {
        assert_eq!(prepared("KRAKÓW", true), prepared("Kraków", true));
        assert_eq!(prepared("Krako\u{301}w", true), prepared("KRAKÓW", true));
        assert_eq!(prepared("Straße", true), "straße");
        assert_ne!(prepared("Straße", true), prepared("STRASSE", true));
        assert_eq!(prepared("ΣΊΣΥΦΟΣ", true), "σίσυφοσ");
        assert_ne!(prepared("σίσυφος", true), prepared("ΣΊΣΥΦΟΣ", true));
        assert_eq!(prepared("İ", true), "i");
        assert_eq!(prepared("ı", true), "ı");
        assert_eq!(prepared("\u{212A}", true), "k");
        assert_eq!(prepared("\u{212B}", true), "å");
        assert_eq!(prepared("Ａ", true), "a");
        assert_eq!(prepared("ǅ", true), "dž");
        // No folding after NFKC.
        assert_eq!(prepared("\u{3392}", true), "MHz");
        assert_eq!(prepared("\u{FB01}le", true), "file");
        assert_ne!(prepared("Kraków", false), prepared("KRAKÓW", false));
        assert_eq!(prepared("\u{212B}", false), "Å");
    }

    #[test]
    fn only_non_ascii_values_or_control_characters_may_prepare_differently() {
        assert!(!may_prepare_differently_than_rfc4518(b"Plain value (1)"));
        assert!(may_prepare_differently_than_rfc4518(b"a\tb"));
        assert!(may_prepare_differently_than_rfc4518("Groß".as_bytes()));
    }

    fn prepared_by_pipeline_only(value: &str, fold: bool) -> String {
        let mut output = String::new();
        prepare_unicode_pipeline(
            value,
            fold,
            &mut SpaceCollapser {
                pending_space: false,
            },
            &mut output,
        );
        if output.is_empty() && !value.is_empty() {
            output.push(' ');
        }
        output
    }

    proptest::proptest! {
        #[test]
        fn segmented_preparation_equals_the_whole_pipeline(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "a", "K", "e", " ", "  ", "\u{1}", "\t", "\u{301}", "\u{308}", "\u{AD}", "\u{A0}", "Ó", "ß", "\u{FB01}",
                "Ａ", "\u{212A}", "\u{1100}", "\u{1161}", "\u{11A8}", "Σ", "ς", "\u{3000}", "Z", "-", "\u{7F}", "\u{85}",
                "ö", "Ü", "É", "ÿ", "×", "÷", "Þ", "ð", "\u{B5}", "\u{C0}", "\u{DE}", "\u{FF}", "İ", "\u{3392}", "<",
                "\u{338}", "\u{200B}",
            ]), 0..12),
            fold in proptest::bool::ANY,
        ) {
            let value = parts.concat();
            proptest::prop_assert_eq!(prepared(&value, fold), prepared_by_pipeline_only(&value, fold));
        }
    }
}
