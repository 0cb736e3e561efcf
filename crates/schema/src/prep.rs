//! RFC 4518 string preparation (map, case fold, NFKC, insignificant space handling) with an
//! allocation-light ASCII fast path, because the loader runs it on millions of values.

use unicode_normalization::UnicodeNormalization;

/// Prepares `value` into `output`: control characters dropped, whitespace variants mapped to
/// SPACE, optionally case folded (full Unicode folding), NFKC, then leading/trailing spaces
/// removed and inner space runs collapsed to one space. A value of only spaces becomes one space
/// (so it stays distinguishable from an empty value, as OpenLDAP does).
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
        let mapped = match byte {
            b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r' => b' ',
            0x00..=0x08 | 0x0E..=0x1F | 0x7F => continue,
            other if case_fold => other.to_ascii_lowercase(),
            other => other,
        };
        if mapped == b' ' {
            pending_space = output.len() > start;
            continue;
        }
        if pending_space {
            output.push(b' ');
            pending_space = false;
        }
        output.push(mapped);
    }
    if output.len() == start && !bytes.is_empty() {
        output.push(b' ');
    }
}

/// RFC 4518 §2.2: characters mapped to nothing.
fn maps_to_nothing(character: char) -> bool {
    matches!(character,
        '\u{0000}'..='\u{0008}' | '\u{000E}'..='\u{001F}' | '\u{007F}'..='\u{0084}' | '\u{0086}'..='\u{009F}'
        | '\u{00AD}' | '\u{034F}' | '\u{06DD}' | '\u{070F}' | '\u{1806}' | '\u{180B}'..='\u{180E}'
        | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2063}' | '\u{206A}'..='\u{206F}'
        | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFC}')
}

/// RFC 4518 §2.2: characters mapped to SPACE.
fn maps_to_space(character: char) -> bool {
    matches!(character,
        '\u{0009}'..='\u{000D}' | '\u{0020}' | '\u{0085}' | '\u{00A0}' | '\u{1680}' | '\u{2000}'..='\u{200A}'
        | '\u{2028}' | '\u{2029}' | '\u{202F}' | '\u{205F}' | '\u{3000}')
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

/// Printable ASCII: NFKC-stable, never composes with a preceding character, and folds to its
/// ASCII lowercase.
fn is_plain_ascii(byte: u8) -> bool {
    (0x20..=0x7E).contains(&byte)
}

/// Mostly-ASCII text with some other characters: plain ASCII characters not followed by a
/// non-plain one go straight through; every other stretch (with the plain character before it,
/// which a combining mark may compose with) goes through the full map/fold/NFKC pipeline.
/// Equal to running the pipeline on the whole string (see the proptest), but much cheaper.
fn prepare_unicode(value: &str, case_fold: bool, output: &mut String) {
    let bytes = value.as_bytes();
    let mut collapser = SpaceCollapser {
        pending_space: false,
    };
    let is_boundary = |position: usize| {
        is_plain_ascii(bytes[position])
            && bytes
                .get(position + 1)
                .is_none_or(|next| is_plain_ascii(*next))
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
        // `start` is a plain ASCII byte or a character start, `position` a plain ASCII byte or
        // the end: both are character boundaries.
        let stretch = &value[start..position];
        if !prepare_latin1_letters(stretch, case_fold, &mut collapser, output) {
            prepare_unicode_pipeline(stretch, case_fold, &mut collapser, output);
        }
    }
}

/// A Latin-1 letter (U+00C0..U+00FF) other than ß: NFKC-stable, never the second character of
/// a composition, and fully case folded by ASCII's rule moved up by 0xC0 - 0x40 (its uppercase
/// U+00C0..U+00DE, bar ×, folds to the character 0x20 above it; ß folds to "ss").
fn is_latin1_letter(character: char) -> bool {
    ('\u{C0}'..='\u{FF}').contains(&character) && character != '\u{DF}'
}

/// The common stretch of European names and places (`Kraków`, `Müller`): only plain ASCII
/// and Latin-1 letters, followed by plain ASCII or the end, so no character can compose with a
/// neighbour; prepared character by character (the full pipeline cost ~1,800 instructions per
/// value). False, writing nothing, when the stretch holds anything else.
fn prepare_latin1_letters(
    stretch: &str,
    case_fold: bool,
    collapser: &mut SpaceCollapser,
    output: &mut String,
) -> bool {
    let fast = stretch.chars().all(|character| {
        (character.is_ascii() && is_plain_ascii(character as u8)) || is_latin1_letter(character)
    });
    if !fast {
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

/// RFC 4518 map, optional full case fold, NFKC (fold, normalize, fold again: NFKC can produce
/// characters with case), streamed through chained iterators without intermediate strings.
fn prepare_unicode_pipeline(
    value: &str,
    case_fold: bool,
    collapser: &mut SpaceCollapser,
    output: &mut String,
) {
    let mapped = value
        .chars()
        .filter(|character| !maps_to_nothing(*character))
        .map(|character| {
            if maps_to_space(character) {
                ' '
            } else {
                character
            }
        });
    if case_fold {
        use caseless::Caseless;
        for character in mapped.default_case_fold().nfkc().default_case_fold() {
            collapser.push(character, output);
        }
    } else {
        for character in mapped.nfkc() {
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
        assert_eq!(prepared("John\tSmith", false), "John Smith");
        assert_eq!(prepared("   ", true), " ");
        assert_eq!(prepared("", true), "");
        assert_eq!(prepared("a\u{1}b", true), "ab");
    }

    #[test]
    fn unicode_case_folding_is_full() {
        assert_eq!(prepared("KRAKÓW", true), prepared("Kraków", true));
        // Decomposed accent equals the precomposed one after NFKC.
        assert_eq!(prepared("Krako\u{301}w", true), prepared("KRAKÓW", true));
        assert_eq!(prepared("Straße", true), prepared("STRASSE", true));
        assert_eq!(prepared("ΣΊΣΥΦΟΣ", true), prepared("σίσυφος", true));
        assert_ne!(prepared("Kraków", false), prepared("KRAKÓW", false));
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
                "ö", "Ü", "É", "ÿ", "×", "÷", "Þ", "ð", "\u{B5}", "\u{C0}", "\u{DE}", "\u{FF}",
            ]), 0..12),
            fold in proptest::bool::ANY,
        ) {
            let value = parts.concat();
            proptest::prop_assert_eq!(prepared(&value, fold), prepared_by_pipeline_only(&value, fold));
        }
    }

    #[test]
    fn unicode_spaces_and_ignorable_characters_are_mapped() {
        assert_eq!(prepared("a\u{00A0}\u{3000}b", true), "a b");
        assert_eq!(prepared("so\u{00AD}ft", true), "soft");
        assert_eq!(prepared("\u{FB01}le", true), "file");
    }
}
