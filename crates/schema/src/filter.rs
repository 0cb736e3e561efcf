//! Search filters (RFC 4515 strings, RFC 4511 semantics): parsing, string form, preparation
//! against a schema and three-valued evaluation over any entry representation (`EntryView`).

use std::fmt;

use crate::entry::Entry;
use crate::error::{LdapError, ResultCode};
use crate::matching::{integer_as_i64, MatchingRule, MatchingRuleKind};
use crate::schema::{options_match, AttrId, Schema};

/// Most filter items (leaves and operators) one filter may hold.
pub const FILTER_ITEMS_MAX: usize = 100_000;

/// A search filter as received (descriptions and values not yet resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Not(Box<Filter>),
    Equality {
        description: String,
        value: Vec<u8>,
    },
    Substrings {
        description: String,
        initial: Option<Vec<u8>>,
        any: Vec<Vec<u8>>,
        final_: Option<Vec<u8>>,
    },
    GreaterOrEqual {
        description: String,
        value: Vec<u8>,
    },
    LessOrEqual {
        description: String,
        value: Vec<u8>,
    },
    Present {
        description: String,
    },
    Approx {
        description: String,
        value: Vec<u8>,
    },
    Extensible {
        rule: Option<String>,
        description: Option<String>,
        value: Vec<u8>,
        dn_attributes: bool,
    },
}

/// Whether a byte may appear in a filter's attribute description or matching rule name
/// (descriptors, OIDs, options; `_` as slapd accepts it). The text parser and the server's
/// converter of decoded filters both hold names to this.
pub fn is_filter_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b';' | b'.' | b'_')
}

fn filter_error(text: &str, position: usize, why: &str) -> LdapError {
    LdapError::new(
        ResultCode::ProtocolError,
        format!("invalid filter '{text}': {why} at offset {position}"),
    )
}

impl Filter {
    /// Parses an RFC 4515 filter string; a bare item without parentheses (`cn=x`) is accepted.
    /// Nesting deeper than `depth_max` is an error (adminLimitExceeded), as is more than
    /// `FILTER_ITEMS_MAX` items.
    pub fn parse(text: &str, depth_max: usize) -> Result<Filter, LdapError> {
        let trimmed = text.trim_matches(' ');
        let mut parser = FilterParser {
            text: trimmed,
            bytes: trimmed.as_bytes(),
            position: 0,
            depth_max,
            items: 0,
        };
        let filter = if parser.peek() == Some(b'(') {
            parser.filter(0)?
        } else {
            parser.item()?
        };
        if parser.position != trimmed.len() {
            return Err(parser.error("text after the filter"));
        }
        Ok(filter)
    }
}

impl Filter {
    /// Checks a filter built elsewhere (e.g. decoded from BER) against the limits `parse`
    /// enforces: nesting at most `depth_max` And/Or/Not levels, at most `FILTER_ITEMS_MAX`
    /// items (adminLimitExceeded otherwise). Iterative, so a hostile depth cannot overflow the
    /// stack here; prepare and evaluate recurse, so run this first.
    pub fn check_limits(&self, depth_max: usize) -> Result<(), LdapError> {
        let mut pending: Vec<(&Filter, usize)> = vec![(self, 0)];
        let mut items = 0usize;
        while let Some((filter, depth)) = pending.pop() {
            items += 1;
            if items > FILTER_ITEMS_MAX {
                return Err(LdapError::new(
                    ResultCode::AdminLimitExceeded,
                    format!("filter has more than {FILTER_ITEMS_MAX} items"),
                ));
            }
            if depth > depth_max {
                return Err(LdapError::new(
                    ResultCode::AdminLimitExceeded,
                    format!("filter nesting deeper than {depth_max} levels"),
                ));
            }
            match filter {
                Filter::And(children) | Filter::Or(children) => {
                    pending.extend(children.iter().map(|child| (child, depth + 1)));
                }
                Filter::Not(child) => pending.push((child, depth + 1)),
                _ => {}
            }
        }
        Ok(())
    }

    /// Memory the filter holds: every node, and each name and value as a heap block
    /// (`heap_block_bytes`). Iterative, as `check_limits`.
    pub fn held_bytes(&self) -> usize {
        let block = heap_block_bytes;
        let mut pending: Vec<&Filter> = vec![self];
        let mut held = 0usize;
        while let Some(filter) = pending.pop() {
            held += std::mem::size_of::<Filter>();
            held += match filter {
                Filter::And(children) | Filter::Or(children) => {
                    pending.extend(children.iter());
                    HEAP_BLOCK_OVERHEAD_BYTES
                }
                Filter::Not(child) => {
                    pending.push(child);
                    HEAP_BLOCK_OVERHEAD_BYTES
                }
                Filter::Equality { description, value }
                | Filter::GreaterOrEqual { description, value }
                | Filter::LessOrEqual { description, value }
                | Filter::Approx { description, value } => {
                    block(description.len()) + block(value.len())
                }
                Filter::Present { description } => block(description.len()),
                Filter::Substrings {
                    description,
                    initial,
                    any,
                    final_,
                } => {
                    let piece =
                        |piece: &Option<Vec<u8>>| piece.as_ref().map_or(0, |p| block(p.len()));
                    block(description.len())
                        + piece(initial)
                        + piece(final_)
                        + block(any.len() * std::mem::size_of::<Vec<u8>>())
                        + any.iter().map(|piece| block(piece.len())).sum::<usize>()
                }
                Filter::Extensible {
                    rule,
                    description,
                    value,
                    ..
                } => {
                    rule.as_ref().map_or(0, |rule| block(rule.len()))
                        + description.as_ref().map_or(0, |d| block(d.len()))
                        + block(value.len())
                }
            };
        }
        held
    }
}

/// What one heap allocation (a `Vec`'s or `String`'s buffer) costs beyond its bytes: the
/// allocator's rounding and bookkeeping, at most a size class's step for small blocks.
const HEAP_BLOCK_OVERHEAD_BYTES: usize = 16;

/// Memory a heap block of `bytes` holds: its bytes and what its allocation costs beyond them
/// (what `held_bytes` counts, here and for anything else queued in memory).
pub fn heap_block_bytes(bytes: usize) -> usize {
    bytes + HEAP_BLOCK_OVERHEAD_BYTES
}

struct FilterParser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    position: usize,
    depth_max: usize,
    items: usize,
}

impl FilterParser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.position).copied()
    }

    fn error(&self, why: &str) -> LdapError {
        filter_error(self.text, self.position, why)
    }

    fn expect(&mut self, byte: u8) -> Result<(), LdapError> {
        if self.peek() == Some(byte) {
            self.position += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected '{}'", byte as char)))
        }
    }

    fn count_item(&mut self) -> Result<(), LdapError> {
        self.items += 1;
        if self.items > FILTER_ITEMS_MAX {
            return Err(LdapError::new(
                ResultCode::AdminLimitExceeded,
                format!("filter has more than {FILTER_ITEMS_MAX} items"),
            ));
        }
        Ok(())
    }

    fn filter(&mut self, depth: usize) -> Result<Filter, LdapError> {
        if depth > self.depth_max {
            return Err(LdapError::new(
                ResultCode::AdminLimitExceeded,
                format!("filter nesting deeper than {} levels", self.depth_max),
            ));
        }
        self.count_item()?;
        self.expect(b'(')?;
        let filter = match self.peek() {
            Some(b'&') => {
                self.position += 1;
                Filter::And(self.filter_list(depth)?)
            }
            Some(b'|') => {
                self.position += 1;
                Filter::Or(self.filter_list(depth)?)
            }
            Some(b'!') => {
                self.position += 1;
                Filter::Not(Box::new(self.filter(depth + 1)?))
            }
            _ => self.item()?,
        };
        self.expect(b')')?;
        Ok(filter)
    }

    fn filter_list(&mut self, depth: usize) -> Result<Vec<Filter>, LdapError> {
        let mut filters = Vec::new();
        while self.peek() == Some(b'(') {
            filters.push(self.filter(depth + 1)?);
        }
        Ok(filters)
    }

    fn description(&mut self) -> &str {
        let start = self.position;
        while self.peek().is_some_and(is_filter_name_byte) {
            self.position += 1;
        }
        &self.text[start..self.position]
    }

    /// An assertion value up to `)` (or the end), with `\XX` escapes decoded. Returns the pieces
    /// split at unescaped `*` when `split_stars`.
    fn value_pieces(&mut self, split_stars: bool) -> Result<Vec<Vec<u8>>, LdapError> {
        let mut pieces = vec![Vec::new()];
        while let Some(byte) = self.peek() {
            match byte {
                b')' => break,
                b'(' => return Err(self.error("unescaped '(' in value")),
                b'\\' => {
                    let high = self.bytes.get(self.position + 1).copied();
                    let low = self.bytes.get(self.position + 2).copied();
                    match (high, low) {
                        (Some(high), Some(low))
                            if high.is_ascii_hexdigit() && low.is_ascii_hexdigit() =>
                        {
                            let digit = |byte: u8| {
                                (byte as char).to_digit(16).expect("hex digit checked") as u8
                            };
                            pieces
                                .last_mut()
                                .expect("never empty")
                                .push(digit(high) << 4 | digit(low));
                            self.position += 3;
                        }
                        _ => return Err(self.error("bad escape (use \\XX)")),
                    }
                }
                b'*' if split_stars => {
                    pieces.push(Vec::new());
                    self.position += 1;
                }
                _ => {
                    pieces.last_mut().expect("never empty").push(byte);
                    self.position += 1;
                }
            }
        }
        Ok(pieces)
    }

    fn single_value(&mut self) -> Result<Vec<u8>, LdapError> {
        let mut pieces = self.value_pieces(false)?;
        Ok(pieces.pop().expect("one piece"))
    }

    fn item(&mut self) -> Result<Filter, LdapError> {
        self.count_item()?;
        let description = self.description().to_string();
        match self.peek() {
            Some(b':') => return self.extensible(description),
            Some(b'~') => {
                self.position += 1;
                self.expect(b'=')?;
                return self
                    .require_description(&description)
                    .map(|_| ())
                    .and_then(|_| {
                        Ok(Filter::Approx {
                            description: description.clone(),
                            value: self.single_value()?,
                        })
                    });
            }
            Some(b'>') => {
                self.position += 1;
                self.expect(b'=')?;
                self.require_description(&description)?;
                return Ok(Filter::GreaterOrEqual {
                    description,
                    value: self.single_value()?,
                });
            }
            Some(b'<') => {
                self.position += 1;
                self.expect(b'=')?;
                self.require_description(&description)?;
                return Ok(Filter::LessOrEqual {
                    description,
                    value: self.single_value()?,
                });
            }
            Some(b'=') => self.position += 1,
            _ => return Err(self.error("expected '=', '~=', '>=', '<=' or ':'")),
        }
        self.require_description(&description)?;
        let mut pieces = self.value_pieces(true)?;
        match pieces.len() {
            1 => Ok(Filter::Equality {
                description,
                value: pieces.pop().expect("one piece"),
            }),
            2 if pieces[0].is_empty() && pieces[1].is_empty() => {
                Ok(Filter::Present { description })
            }
            _ => {
                let final_piece = pieces.pop().expect("at least two pieces");
                let initial_piece = pieces.remove(0);
                if pieces.iter().any(Vec::is_empty) {
                    return Err(self.error("empty substring between '*'s"));
                }
                Ok(Filter::Substrings {
                    description,
                    initial: (!initial_piece.is_empty()).then_some(initial_piece),
                    any: pieces,
                    final_: (!final_piece.is_empty()).then_some(final_piece),
                })
            }
        }
    }

    fn require_description(&self, description: &str) -> Result<(), LdapError> {
        if description.is_empty() {
            Err(self.error("missing attribute description"))
        } else {
            Ok(())
        }
    }

    fn extensible(&mut self, description: String) -> Result<Filter, LdapError> {
        let mut dn_attributes = false;
        let mut rule = None;
        // After the attribute: [":dn"] [":" rule] ":=".
        loop {
            self.expect(b':')?;
            if self.peek() == Some(b'=') {
                self.position += 1;
                break;
            }
            let word = self.description().to_string();
            if word.is_empty() {
                return Err(self.error("expected 'dn' or a matching rule after ':'"));
            }
            if word.eq_ignore_ascii_case("dn") && !dn_attributes && rule.is_none() {
                dn_attributes = true;
            } else if rule.is_none() {
                rule = Some(word);
            } else {
                return Err(self.error("too many ':' parts in extensible match"));
            }
        }
        if description.is_empty() && rule.is_none() {
            return Err(self.error("extensible match needs an attribute or a matching rule"));
        }
        let value = self.single_value()?;
        Ok(Filter::Extensible {
            rule,
            description: (!description.is_empty()).then_some(description),
            value,
            dn_attributes,
        })
    }
}

/// Appends a value escaped for a filter string: `*()\` and NUL always, and bytes of
/// non-UTF-8 values as `\XX`.
fn write_escaped(formatter: &mut fmt::Formatter<'_>, value: &[u8]) -> fmt::Result {
    match std::str::from_utf8(value) {
        Ok(text) => {
            for character in text.chars() {
                match character {
                    '*' | '(' | ')' | '\\' | '\0' => {
                        write!(formatter, "\\{:02x}", character as u32)?
                    }
                    other => write!(formatter, "{other}")?,
                }
            }
        }
        Err(_) => {
            for byte in value {
                if byte.is_ascii_alphanumeric() {
                    write!(formatter, "{}", *byte as char)?;
                } else {
                    write!(formatter, "\\{byte:02x}")?;
                }
            }
        }
    }
    Ok(())
}

impl fmt::Display for Filter {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("(")?;
        match self {
            Filter::And(filters) | Filter::Or(filters) => {
                formatter.write_str(if matches!(self, Filter::And(_)) {
                    "&"
                } else {
                    "|"
                })?;
                for filter in filters {
                    write!(formatter, "{filter}")?;
                }
            }
            Filter::Not(filter) => write!(formatter, "!{filter}")?,
            Filter::Equality { description, value } => {
                write!(formatter, "{description}=")?;
                write_escaped(formatter, value)?;
            }
            Filter::Approx { description, value } => {
                write!(formatter, "{description}~=")?;
                write_escaped(formatter, value)?;
            }
            Filter::GreaterOrEqual { description, value } => {
                write!(formatter, "{description}>=")?;
                write_escaped(formatter, value)?;
            }
            Filter::LessOrEqual { description, value } => {
                write!(formatter, "{description}<=")?;
                write_escaped(formatter, value)?;
            }
            Filter::Present { description } => write!(formatter, "{description}=*")?,
            Filter::Substrings {
                description,
                initial,
                any,
                final_,
            } => {
                write!(formatter, "{description}=")?;
                if let Some(initial) = initial {
                    write_escaped(formatter, initial)?;
                }
                formatter.write_str("*")?;
                for piece in any {
                    write_escaped(formatter, piece)?;
                    formatter.write_str("*")?;
                }
                if let Some(final_) = final_ {
                    write_escaped(formatter, final_)?;
                }
            }
            Filter::Extensible {
                rule,
                description,
                value,
                dn_attributes,
            } => {
                if let Some(description) = description {
                    formatter.write_str(description)?;
                }
                if *dn_attributes {
                    formatter.write_str(":dn")?;
                }
                if let Some(rule) = rule {
                    write!(formatter, ":{rule}")?;
                }
                formatter.write_str(":=")?;
                write_escaped(formatter, value)?;
            }
        }
        formatter.write_str(")")
    }
}

/// RFC 4511 §4.5.1.7 three-valued filter result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tri {
    True,
    False,
    Undefined,
}

impl Tri {
    pub fn and(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::False, _) | (_, Tri::False) => Tri::False,
            (Tri::True, Tri::True) => Tri::True,
            _ => Tri::Undefined,
        }
    }

    pub fn or(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::True, _) | (_, Tri::True) => Tri::True,
            (Tri::False, Tri::False) => Tri::False,
            _ => Tri::Undefined,
        }
    }

    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Tri {
        match self {
            Tri::True => Tri::False,
            Tri::False => Tri::True,
            Tri::Undefined => Tri::Undefined,
        }
    }

    pub fn is_true(self) -> bool {
        self == Tri::True
    }
}

/// Normalized substring assertion: initial, any pieces in order, final.
pub type SubstringPieces = (Option<Vec<u8>>, Vec<Vec<u8>>, Option<Vec<u8>>);

/// The callback `EntryView::for_each_attribute` calls: (attribute, options, values) → continue?
pub type AttributeVisitor<'visitor> =
    dyn FnMut(AttrId, &[String], &mut dyn Iterator<Item = StoredValue<'_>>) -> bool + 'visitor;

/// One stored value: the original bytes and the equality-normalized bytes written beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredValue<'a> {
    pub original: &'a [u8],
    pub normalized: &'a [u8],
}

/// Calls `visit(attr, value)` for each (type, original, normalized) AVA of a DN, normalized
/// already, until it answers false: `EntryView::for_each_dn_ava` of an entry that keeps them.
pub fn visit_dn_avas(
    avas: &[(AttrId, Vec<u8>, Vec<u8>)],
    visit: &mut dyn FnMut(AttrId, StoredValue<'_>) -> bool,
) {
    for (attr, original, normalized) in avas {
        if !visit(
            *attr,
            StoredValue {
                original,
                normalized,
            },
        ) {
            return;
        }
    }
}

/// What a filter needs from an entry. The store implements it over its zero-copy decoded entry;
/// `OwnedEntryView` implements it over an owned `Entry`.
pub trait EntryView {
    /// Calls `visit(attr, options, values)` once per attribute description of the entry
    /// (options lowercased and sorted, as `Schema::parse_description` gives them). Stops early
    /// when `visit` returns false.
    fn for_each_attribute(&self, visit: &mut AttributeVisitor<'_>);

    /// As `for_each_attribute`, visiting only the attributes whose type `wanted` accepts (a
    /// filter item's covered types). A view that can step over the others without decoding
    /// them (the store's records) overrides it.
    fn for_each_attribute_of(
        &self,
        wanted: &dyn Fn(AttrId) -> bool,
        visit: &mut AttributeVisitor<'_>,
    ) {
        self.for_each_attribute(&mut |attr, options, values| {
            !wanted(attr) || visit(attr, options, values)
        });
    }

    /// Calls `visit(attr, value)` for each AVA of the entry's DN (all RDNs), for `:dn:`
    /// extensible matching: the value as the DN spells it and its equality-normalized form (a
    /// rule of another family than the type's own, such as caseExactMatch on `ou`, is applied
    /// to the original). `Schema::for_each_dn_ava_of` does this from the DN string.
    fn for_each_dn_ava(&self, visit: &mut dyn FnMut(AttrId, StoredValue<'_>) -> bool);

    /// Whether the description `attr` + `options` (as `for_each_attribute` gives them) holds a
    /// value whose stored normalized form is `normalized`, when the view answers that with a
    /// lookup rather than a walk of the values (a store's out-of-line attribute: one B-tree
    /// lookup among 100,000 members); None makes the evaluator walk the values. Equality
    /// items ask it before reading a description's values.
    fn lookup_normalized(
        &self,
        _attr: AttrId,
        _options: &[String],
        _normalized: &[u8],
    ) -> Option<bool> {
        None
    }

    /// The stored entry's ID, for in-chain items (resolved to sets of IDs); None for an entry
    /// that is not stored (the root DSE, cn=Subschema, an entry being added).
    fn entry_id(&self) -> Option<u32> {
        None
    }
}

/// An attribute type a filter item applies to, and whether values stored normalized by the
/// type's own equality rule can be compared directly (same normalization family as the item's
/// rule) or must be normalized again from the original.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoveredAttribute {
    pub attr: AttrId,
    pub stored_form_usable: bool,
}

/// A filter resolved against a schema: descriptions become attribute ids (with subtypes),
/// assertion values are normalized. The store walks it to pick index candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreparedFilter {
    True,
    False,
    /// Unknown attribute, no applicable matching rule, or an invalid assertion value.
    Undefined,
    And(Vec<PreparedFilter>),
    Or(Vec<PreparedFilter>),
    Not(Box<PreparedFilter>),
    Equality {
        attr: AttrId,
        options: Vec<String>,
        rule: MatchingRule,
        covered: Vec<CoveredAttribute>,
        normalized: Vec<u8>,
    },
    /// Approximate match is equality on normalized forms.
    Approx {
        attr: AttrId,
        options: Vec<String>,
        rule: MatchingRule,
        covered: Vec<CoveredAttribute>,
        normalized: Vec<u8>,
    },
    Substrings {
        attr: AttrId,
        options: Vec<String>,
        rule: MatchingRule,
        covered: Vec<CoveredAttribute>,
        initial: Option<Vec<u8>>,
        any: Vec<Vec<u8>>,
        final_: Option<Vec<u8>>,
    },
    /// `key` is `rule.ordering_key(normalized assertion)`.
    GreaterOrEqual {
        attr: AttrId,
        options: Vec<String>,
        rule: MatchingRule,
        covered: Vec<CoveredAttribute>,
        key: Vec<u8>,
    },
    LessOrEqual {
        attr: AttrId,
        options: Vec<String>,
        rule: MatchingRule,
        covered: Vec<CoveredAttribute>,
        key: Vec<u8>,
    },
    Present {
        attr: AttrId,
        options: Vec<String>,
        covered: Vec<AttrId>,
    },
    /// `attr` None: every attribute whose equality rule is of the rule's family.
    Extensible {
        rule: MatchingRule,
        attr: Option<AttrId>,
        options: Vec<String>,
        covered: Vec<CoveredAttribute>,
        dn_attributes: bool,
        /// Normalized assertion (for ordering rules: the ordering key; for substrings rules:
        /// the normalized pieces are in `pieces`).
        normalized: Vec<u8>,
        pieces: Option<SubstringPieces>,
    },
    /// `(attr:1.2.840.113556.1.4.1941:=DN)`: the entries reached from the asserted DN through
    /// chains of `attr` values (see `MatchingRuleKind::InChain`). `normalized` is the asserted
    /// DN normalized by the attribute's equality rule; `members` is the resolved closure (set
    /// by the search that runs the filter, `resolve_in_chain`): until then the item is
    /// Undefined.
    InChain {
        attr: AttrId,
        covered: Vec<CoveredAttribute>,
        normalized: Vec<u8>,
        members: Option<EntryIdSet>,
    },
}

/// A set of entry IDs (the store's `u32` IDs), sorted, shared by the copies of a filter.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct EntryIdSet(std::sync::Arc<Vec<u32>>);

impl EntryIdSet {
    /// The set of `ids` (any order, duplicates allowed).
    pub fn new(mut ids: Vec<u32>) -> EntryIdSet {
        ids.sort_unstable();
        ids.dedup();
        EntryIdSet(std::sync::Arc::new(ids))
    }

    pub fn contains(&self, id: u32) -> bool {
        self.0.binary_search(&id).is_ok()
    }

    /// The IDs in ascending order.
    pub fn ids(&self) -> &[u32] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for EntryIdSet {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "EntryIdSet({} ids)", self.0.len())
    }
}

/// One in-chain item to resolve: the chaining attribute (with its subtypes) and the asserted DN
/// normalized by its equality rule.
#[derive(Debug, Clone, Copy)]
pub struct InChainQuery<'f> {
    pub attr: AttrId,
    pub covered: &'f [CoveredAttribute],
    pub normalized: &'f [u8],
}

impl PreparedFilter {
    /// Whether the filter holds an in-chain item not resolved yet.
    pub fn has_unresolved_in_chain(&self) -> bool {
        match self {
            PreparedFilter::And(children) | PreparedFilter::Or(children) => {
                children.iter().any(PreparedFilter::has_unresolved_in_chain)
            }
            PreparedFilter::Not(child) => child.has_unresolved_in_chain(),
            PreparedFilter::InChain { members, .. } => members.is_none(),
            _ => false,
        }
    }

    /// Resolves every in-chain item with `closure` (the entries the chain reaches), in filter
    /// order; the first error ends the walk.
    pub fn resolve_in_chain<E>(
        &mut self,
        closure: &mut dyn FnMut(InChainQuery<'_>) -> Result<EntryIdSet, E>,
    ) -> Result<(), E> {
        match self {
            PreparedFilter::And(children) | PreparedFilter::Or(children) => {
                for child in children {
                    child.resolve_in_chain(closure)?;
                }
                Ok(())
            }
            PreparedFilter::Not(child) => child.resolve_in_chain(closure),
            PreparedFilter::InChain {
                attr,
                covered,
                normalized,
                members,
            } if members.is_none() => {
                *members = Some(closure(InChainQuery {
                    attr: *attr,
                    covered,
                    normalized,
                })?);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

impl Schema {
    fn covered(&self, attr: AttrId, rule: MatchingRule) -> Vec<CoveredAttribute> {
        self.subtypes(attr)
            .iter()
            .map(|subtype| CoveredAttribute {
                attr: *subtype,
                stored_form_usable: self
                    .attribute_type(*subtype)
                    .equality
                    .map(MatchingRule::family)
                    == Some(rule.family()),
            })
            .collect()
    }

    /// Resolves a filter: see `PreparedFilter`. `(&)` is True, `(|)` False; an unknown
    /// attribute or an invalid assertion value makes that item Undefined.
    pub fn prepare_filter(&self, filter: &Filter) -> PreparedFilter {
        match filter {
            Filter::And(filters) if filters.is_empty() => PreparedFilter::True,
            Filter::Or(filters) if filters.is_empty() => PreparedFilter::False,
            Filter::And(filters) => PreparedFilter::And(
                filters
                    .iter()
                    .map(|filter| self.prepare_filter(filter))
                    .collect(),
            ),
            Filter::Or(filters) => PreparedFilter::Or(
                filters
                    .iter()
                    .map(|filter| self.prepare_filter(filter))
                    .collect(),
            ),
            Filter::Not(filter) => PreparedFilter::Not(Box::new(self.prepare_filter(filter))),
            Filter::Present { description } => match self.parse_description(description) {
                Ok(parsed) => PreparedFilter::Present {
                    attr: parsed.attr,
                    covered: self.subtypes(parsed.attr).to_vec(),
                    options: parsed.options,
                },
                Err(_) => PreparedFilter::Undefined,
            },
            Filter::Equality { description, value } | Filter::Approx { description, value } => {
                let Ok(parsed) = self.parse_description(description) else {
                    return PreparedFilter::Undefined;
                };
                let Some(rule) = self.attribute_type(parsed.attr).equality else {
                    return PreparedFilter::Undefined;
                };
                let Ok(normalized) = self.normalize_assertion(rule, value) else {
                    return PreparedFilter::Undefined;
                };
                let approx = matches!(filter, Filter::Approx { .. });
                let leaf = |normalized: Vec<u8>| {
                    let covered = self.covered(parsed.attr, rule);
                    let options = parsed.options.clone();
                    if approx {
                        PreparedFilter::Approx {
                            attr: parsed.attr,
                            options,
                            rule,
                            covered,
                            normalized,
                        }
                    } else {
                        PreparedFilter::Equality {
                            attr: parsed.attr,
                            options,
                            rule,
                            covered,
                            normalized,
                        }
                    }
                };
                // As in OpenLDAP, (objectClass=person) also matches entries listing only a
                // subclass (inetOrgPerson): expand to an OR over the class and its subclasses,
                // which keeps index lookups exact.
                let subclasses = if parsed.attr == self.object_class_attribute() {
                    self.subclass_names(&normalized)
                } else {
                    Vec::new()
                };
                if subclasses.len() > 1 {
                    PreparedFilter::Or(subclasses.into_iter().map(leaf).collect())
                } else {
                    leaf(normalized)
                }
            }
            Filter::Substrings {
                description,
                initial,
                any,
                final_,
            } => {
                let Ok(parsed) = self.parse_description(description) else {
                    return PreparedFilter::Undefined;
                };
                let Some(rule) = self.attribute_type(parsed.attr).substring else {
                    return PreparedFilter::Undefined;
                };
                match normalize_pieces(rule, initial.as_deref(), any, final_.as_deref()) {
                    Ok((initial, any, final_)) => PreparedFilter::Substrings {
                        attr: parsed.attr,
                        covered: self.covered(parsed.attr, rule),
                        options: parsed.options,
                        rule,
                        initial,
                        any,
                        final_,
                    },
                    Err(_) => PreparedFilter::Undefined,
                }
            }
            Filter::GreaterOrEqual { description, value }
            | Filter::LessOrEqual { description, value } => {
                let Ok(parsed) = self.parse_description(description) else {
                    return PreparedFilter::Undefined;
                };
                let Some(rule) = self.attribute_type(parsed.attr).ordering else {
                    return PreparedFilter::Undefined;
                };
                let Ok(normalized) = self.normalize_assertion(rule, value) else {
                    return PreparedFilter::Undefined;
                };
                let key = rule.ordering_key(&normalized);
                let covered = self.covered(parsed.attr, rule);
                if matches!(filter, Filter::GreaterOrEqual { .. }) {
                    PreparedFilter::GreaterOrEqual {
                        attr: parsed.attr,
                        options: parsed.options,
                        rule,
                        covered,
                        key,
                    }
                } else {
                    PreparedFilter::LessOrEqual {
                        attr: parsed.attr,
                        options: parsed.options,
                        rule,
                        covered,
                        key,
                    }
                }
            }
            Filter::Extensible {
                rule,
                description,
                value,
                dn_attributes,
            } => self.prepare_extensible(
                rule.as_deref(),
                description.as_deref(),
                value,
                *dn_attributes,
            ),
        }
    }

    fn prepare_extensible(
        &self,
        rule_name: Option<&str>,
        description: Option<&str>,
        value: &[u8],
        dn_attributes: bool,
    ) -> PreparedFilter {
        let parsed = match description.map(|description| self.parse_description(description)) {
            None => None,
            Some(Ok(parsed)) => Some(parsed),
            Some(Err(_)) => return PreparedFilter::Undefined,
        };
        let rule = match (rule_name, &parsed) {
            (Some(name), _) => match MatchingRule::by_name_or_oid(name) {
                Some(rule) if rule.kind() == MatchingRuleKind::InChain => {
                    return match (&parsed, dn_attributes) {
                        (Some(parsed), false) => self.prepare_in_chain(parsed.attr, value),
                        _ => PreparedFilter::Undefined,
                    };
                }
                Some(rule) => rule,
                None => return PreparedFilter::Undefined,
            },
            (None, Some(parsed)) => match self.attribute_type(parsed.attr).equality {
                Some(rule) => rule,
                None => return PreparedFilter::Undefined,
            },
            (None, None) => return PreparedFilter::Undefined,
        };
        let covered = match &parsed {
            Some(parsed) => self.covered(parsed.attr, rule),
            // Attribute-less: every attribute the rule applies to, i.e. whose equality rule is
            // of the rule's family or whose syntax is the rule's assertion syntax. Not the
            // virtual entryDN: slapd tests the attributes an entry holds, so
            // `(:distinguishedNameMatch:=<DN>)` finds the entries naming it, not the entry itself.
            None => self
                .attribute_types()
                .filter(|(attr, _)| Some(*attr) != self.attribute("entryDN"))
                .filter_map(|(attr, attribute_type)| {
                    let same_family =
                        attribute_type.equality.map(MatchingRule::family) == Some(rule.family());
                    let same_syntax = attribute_type
                        .syntax_oid
                        .as_deref()
                        .is_some_and(|syntax_oid| rule.applies_to_syntax(syntax_oid));
                    (same_family || same_syntax).then_some(CoveredAttribute {
                        attr,
                        stored_form_usable: same_family,
                    })
                })
                .collect(),
        };
        let (normalized, pieces) = match rule.kind() {
            MatchingRuleKind::Bitwise => match self.normalize_with_rule(rule, value) {
                // The bits must fit the 64-bit integer they are tested as.
                Ok(normalized) if integer_as_i64(&normalized).is_some() => (normalized, None),
                _ => return PreparedFilter::Undefined,
            },
            MatchingRuleKind::Equality | MatchingRuleKind::DnRelation => {
                match self.normalize_with_rule(rule, value) {
                    Ok(normalized) => (normalized, None),
                    Err(_) => return PreparedFilter::Undefined,
                }
            }
            // Handled above: an in-chain item names its attribute.
            MatchingRuleKind::InChain => return PreparedFilter::Undefined,
            MatchingRuleKind::Ordering => match self.normalize_with_rule(rule, value) {
                Ok(normalized) => (rule.ordering_key(&normalized), None),
                Err(_) => return PreparedFilter::Undefined,
            },
            MatchingRuleKind::Substrings => {
                // The assertion value is a substring pattern: pieces split at '*'.
                let mut raw: Vec<&[u8]> = value.split(|byte| *byte == b'*').collect();
                if raw.len() < 2 {
                    return PreparedFilter::Undefined;
                }
                let final_raw = raw.pop().expect("two pieces");
                let initial_raw = raw.remove(0);
                let any_raw: Vec<Vec<u8>> = raw
                    .iter()
                    .filter(|piece| !piece.is_empty())
                    .map(|piece| piece.to_vec())
                    .collect();
                let initial = (!initial_raw.is_empty()).then_some(initial_raw);
                let final_ = (!final_raw.is_empty()).then_some(final_raw);
                match normalize_pieces(rule, initial, &any_raw, final_) {
                    Ok(pieces) => (Vec::new(), Some(pieces)),
                    Err(_) => return PreparedFilter::Undefined,
                }
            }
        };
        PreparedFilter::Extensible {
            rule,
            attr: parsed.as_ref().map(|parsed| parsed.attr),
            options: parsed.map(|parsed| parsed.options).unwrap_or_default(),
            covered,
            dn_attributes,
            normalized,
            pieces,
        }
    }

    /// An in-chain item on `attr`: only attributes compared as DNs (distinguishedNameMatch or
    /// uniqueMemberMatch: member, uniqueMember, memberOf, manager, ...) chain; the asserted
    /// value is normalized as the attribute's values are, so it keys their equality index.
    fn prepare_in_chain(&self, attr: AttrId, value: &[u8]) -> PreparedFilter {
        let Some(rule) = self.attribute_type(attr).equality else {
            return PreparedFilter::Undefined;
        };
        if !matches!(
            rule.family(),
            crate::matching::NormalizationFamily::DistinguishedName
                | crate::matching::NormalizationFamily::UniqueMember
        ) {
            return PreparedFilter::Undefined;
        }
        match self.normalize_assertion(rule, value) {
            Ok(normalized) => PreparedFilter::InChain {
                attr,
                covered: self.covered(attr, rule),
                normalized,
                members: None,
            },
            Err(_) => PreparedFilter::Undefined,
        }
    }

    /// Validates an assertion value against the rule's assertion syntax (an empty string is
    /// not a Directory String, `true` not a Boolean) and normalizes it.
    fn normalize_assertion(&self, rule: MatchingRule, value: &[u8]) -> Result<Vec<u8>, LdapError> {
        crate::syntax::Syntax::from_oid(rule.equality_rule().syntax_oid()).validate(value)?;
        self.normalize_with_rule(rule, value)
    }

    /// Normalized names (lowercased primary names, as objectClass values normalize) of the
    /// class named by `normalized_class` and of every class deriving from it, the class first.
    /// Empty for an unknown class.
    pub fn subclass_names(&self, normalized_class: &[u8]) -> Vec<Vec<u8>> {
        let Some(class) = std::str::from_utf8(normalized_class)
            .ok()
            .and_then(|name| self.object_class(name))
        else {
            return Vec::new();
        };
        let mut names = vec![normalized_class.to_vec()];
        for (candidate, definition) in self.object_classes() {
            if candidate != class && definition.superclasses.contains(&class) {
                names.push(definition.name().to_ascii_lowercase().into_bytes());
            }
        }
        names
    }

    /// Calls `visit(attr, value)` for each AVA of a DN string as stored (original spelling),
    /// with the value normalized by the type's equality rule: the helper an `EntryView` needs
    /// for `for_each_dn_ava`. AVAs of unknown types or invalid values (never in a stored DN)
    /// are skipped.
    pub fn for_each_dn_ava_of(
        &self,
        dn: &str,
        visit: &mut dyn FnMut(AttrId, StoredValue<'_>) -> bool,
    ) {
        if let Ok(dn) = crate::dn::Dn::parse(dn) {
            self.for_each_parsed_dn_ava(&dn, visit);
        }
    }

    /// (type, original value, normalized value) of each AVA of a parsed DN, as
    /// `for_each_dn_ava_of` visits them: what an `EntryView` keeps to answer `for_each_dn_ava`
    /// (with `visit_dn_avas`) more than once.
    pub fn dn_avas(&self, dn: &crate::dn::Dn) -> Vec<(AttrId, Vec<u8>, Vec<u8>)> {
        let mut avas = Vec::new();
        self.for_each_parsed_dn_ava(dn, &mut |attr, value| {
            avas.push((attr, value.original.to_vec(), value.normalized.to_vec()));
            true
        });
        avas
    }

    fn for_each_parsed_dn_ava(
        &self,
        dn: &crate::dn::Dn,
        visit: &mut dyn FnMut(AttrId, StoredValue<'_>) -> bool,
    ) {
        for rdn in &dn.rdns {
            for ava in &rdn.avas {
                let Some(attr) = self.attribute(&ava.attr) else {
                    continue;
                };
                let Ok(normalized) = self.normalize_value(attr, &ava.value) else {
                    continue;
                };
                let value = StoredValue {
                    original: &ava.value,
                    normalized: &normalized,
                };
                if !visit(attr, value) {
                    return;
                }
            }
        }
    }
}

fn normalize_pieces(
    rule: MatchingRule,
    initial: Option<&[u8]>,
    any: &[Vec<u8>],
    final_: Option<&[u8]>,
) -> Result<SubstringPieces, LdapError> {
    use crate::matching::SubstringPosition;
    let normalize = |piece: &[u8], position| rule.normalize_substring_piece_at(piece, position);
    // A piece of only insignificant characters normalizes to nothing (or one space) and then
    // constrains nothing at the edges.
    let edge = |piece: Option<&[u8]>, position| -> Result<Option<Vec<u8>>, LdapError> {
        match piece {
            None => Ok(None),
            Some(piece) => {
                let normalized = normalize(piece, position)?;
                Ok((!normalized.is_empty() && normalized != b" ").then_some(normalized))
            }
        }
    };
    let initial = edge(initial, SubstringPosition::Initial)?;
    let final_ = edge(final_, SubstringPosition::Final)?;
    let mut any_normalized = Vec::with_capacity(any.len());
    for piece in any {
        let normalized = normalize(piece, SubstringPosition::Any)?;
        if !normalized.is_empty() {
            any_normalized.push(normalized);
        }
    }
    Ok((initial, any_normalized, final_))
}

/// Substring match on normalized bytes: initial prefix, any pieces in order without overlap,
/// final suffix not overlapping what was consumed.
pub fn substrings_match(
    value: &[u8],
    initial: Option<&[u8]>,
    any: &[Vec<u8>],
    final_: Option<&[u8]>,
) -> bool {
    let mut start = 0;
    if let Some(initial) = initial {
        if !value.starts_with(initial) {
            return false;
        }
        start = initial.len();
    }
    let mut end = value.len();
    if let Some(final_) = final_ {
        if value.len() < start + final_.len() || !value.ends_with(final_) {
            return false;
        }
        end = value.len() - final_.len();
    }
    for piece in any {
        match memchr::memmem::find(&value[start..end], piece) {
            Some(offset) => start += offset + piece.len(),
            None => return false,
        }
    }
    true
}

impl PreparedFilter {
    /// Evaluates the filter over an entry (RFC 4511 §4.5.1.7 three-valued logic).
    pub fn evaluate<V: EntryView + ?Sized>(&self, view: &V) -> Tri {
        self.evaluate_dyn(
            view.entry_id(),
            &|wanted, visit| view.for_each_attribute_of(wanted, visit),
            &|visit| view.for_each_dn_ava(visit),
            &|attr, options, normalized| view.lookup_normalized(attr, options, normalized),
        )
    }

    fn evaluate_dyn(
        &self,
        id: Option<u32>,
        attributes: &AttributeWalker<'_>,
        dn_avas: &DnWalker<'_>,
        lookup: &Lookup<'_>,
    ) -> Tri {
        match self {
            PreparedFilter::True => Tri::True,
            PreparedFilter::False => Tri::False,
            PreparedFilter::Undefined => Tri::Undefined,
            PreparedFilter::And(filters) => {
                let mut result = Tri::True;
                for filter in filters {
                    result = result.and(filter.evaluate_dyn(id, attributes, dn_avas, lookup));
                    if result == Tri::False {
                        break;
                    }
                }
                result
            }
            PreparedFilter::Or(filters) => {
                let mut result = Tri::False;
                for filter in filters {
                    result = result.or(filter.evaluate_dyn(id, attributes, dn_avas, lookup));
                    if result == Tri::True {
                        break;
                    }
                }
                result
            }
            PreparedFilter::Not(filter) => {
                filter.evaluate_dyn(id, attributes, dn_avas, lookup).not()
            }
            PreparedFilter::Present {
                options, covered, ..
            } => {
                let mut found = false;
                let wanted = |attr| covered.contains(&attr);
                attributes(&wanted, &mut |attr, value_options, _values| {
                    found = covered.contains(&attr) && options_match(options, value_options);
                    !found
                });
                tri(found)
            }
            PreparedFilter::Equality {
                options,
                rule,
                covered,
                normalized,
                ..
            }
            | PreparedFilter::Approx {
                options,
                rule,
                covered,
                normalized,
                ..
            } => {
                let mut found = false;
                let wanted = |attr| covered.iter().any(|coverage| coverage.attr == attr);
                attributes(&wanted, &mut |attr, value_options, values| {
                    let Some(coverage) = covered.iter().find(|coverage| coverage.attr == attr)
                    else {
                        return true;
                    };
                    if !options_match(options, value_options) {
                        return true;
                    }
                    if coverage.stored_form_usable {
                        if let Some(hit) = lookup(attr, value_options, normalized) {
                            found = hit;
                            return !found;
                        }
                    }
                    for value in values {
                        if value_matches(coverage, *rule, value, &mut |candidate| {
                            candidate == normalized.as_slice()
                        }) {
                            found = true;
                            return false;
                        }
                    }
                    true
                });
                tri(found)
            }
            PreparedFilter::Substrings {
                options,
                rule,
                covered,
                initial,
                any,
                final_,
                ..
            } => any_value(attributes, options, covered, *rule, &mut |candidate| {
                substrings_match(candidate, initial.as_deref(), any, final_.as_deref())
            }),
            PreparedFilter::GreaterOrEqual {
                options,
                rule,
                covered,
                key,
                ..
            } => any_value(attributes, options, covered, *rule, &mut |candidate| {
                rule.ordering_key(candidate) >= *key
            }),
            PreparedFilter::LessOrEqual {
                options,
                rule,
                covered,
                key,
                ..
            } => any_value(attributes, options, covered, *rule, &mut |candidate| {
                rule.ordering_key(candidate) <= *key
            }),
            // Resolved: membership of the entry's ID; an entry without one (the root DSE) is
            // in no chain. Unresolved (a filter evaluated outside a search): Undefined.
            PreparedFilter::InChain { members, .. } => match (members, id) {
                (Some(members), Some(id)) => tri(members.contains(id)),
                (Some(_), None) => Tri::False,
                (None, _) => Tri::Undefined,
            },
            PreparedFilter::Extensible {
                rule,
                options,
                covered,
                dn_attributes,
                normalized,
                pieces,
                ..
            } => {
                let asserted_bits = integer_as_i64(normalized).unwrap_or(0);
                let mut test = |candidate: &[u8]| match rule.kind() {
                    MatchingRuleKind::Equality => candidate == normalized.as_slice(),
                    MatchingRuleKind::Bitwise => rule.bitwise_matches(candidate, asserted_bits),
                    MatchingRuleKind::DnRelation => rule.dn_relation_matches(candidate, normalized),
                    MatchingRuleKind::InChain => false,
                    MatchingRuleKind::Ordering => rule.ordering_key(candidate) < *normalized,
                    MatchingRuleKind::Substrings => match pieces {
                        Some((initial, any, final_)) => {
                            substrings_match(candidate, initial.as_deref(), any, final_.as_deref())
                        }
                        None => false,
                    },
                };
                let mut result = any_value(attributes, options, covered, *rule, &mut test);
                if *dn_attributes && result != Tri::True {
                    let mut found = false;
                    dn_avas(&mut |attr, value| {
                        if let Some(coverage) =
                            covered.iter().find(|coverage| coverage.attr == attr)
                        {
                            found = value_matches(coverage, *rule, value, &mut test);
                        }
                        !found
                    });
                    if found {
                        result = Tri::True;
                    }
                }
                result
            }
        }
    }
}

/// Walks the attributes whose type the first argument accepts (`EntryView::for_each_attribute_of`).
type AttributeWalker<'a> = dyn Fn(
        &dyn Fn(AttrId) -> bool,
        &mut dyn FnMut(AttrId, &[String], &mut dyn Iterator<Item = StoredValue<'_>>) -> bool,
    ) + 'a;
type DnWalker<'a> = dyn Fn(&mut dyn FnMut(AttrId, StoredValue<'_>) -> bool) + 'a;
type Lookup<'a> = dyn Fn(AttrId, &[String], &[u8]) -> Option<bool> + 'a;

fn tri(value: bool) -> Tri {
    if value {
        Tri::True
    } else {
        Tri::False
    }
}

/// True when some value of a covered attribute (with the item's options) passes `test`,
/// comparing stored normalized bytes, or the original normalized again by the rule's family
/// when the attribute's own equality rule differs.
fn any_value(
    attributes: &AttributeWalker<'_>,
    options: &[String],
    covered: &[CoveredAttribute],
    rule: MatchingRule,
    test: &mut dyn FnMut(&[u8]) -> bool,
) -> Tri {
    let mut found = false;
    let wanted = |attr| covered.iter().any(|coverage| coverage.attr == attr);
    attributes(&wanted, &mut |attr, value_options, values| {
        let Some(coverage) = covered.iter().find(|coverage| coverage.attr == attr) else {
            return true;
        };
        if !options_match(options, value_options) {
            return true;
        }
        for value in values {
            if value_matches(coverage, rule, value, test) {
                found = true;
                return false;
            }
        }
        true
    });
    tri(found)
}

/// Whether one stored value passes `test`: its stored normalized bytes when they are of the
/// rule's family, otherwise the original normalized again by the rule's family.
fn value_matches(
    coverage: &CoveredAttribute,
    rule: MatchingRule,
    value: StoredValue<'_>,
    test: &mut dyn FnMut(&[u8]) -> bool,
) -> bool {
    if coverage.stored_form_usable {
        test(value.normalized)
    } else {
        rule.equality_rule()
            .normalize(value.original)
            .is_ok_and(|renormalized| test(&renormalized))
    }
}

/// (attribute, options, (original, normalized) values) of an `OwnedEntryView`.
type NormalizedAttribute = (AttrId, Vec<String>, Vec<(Vec<u8>, Vec<u8>)>);

/// An `EntryView` over an owned `Entry`, normalizing every value once at construction (for
/// tests, brute-force checks and server-side evaluation of entries not yet stored). It also
/// presents the virtual `entryDN` attribute.
pub struct OwnedEntryView {
    attributes: Vec<NormalizedAttribute>,
    /// (type, original value, normalized value) of each AVA of the DN.
    dn_avas: Vec<(AttrId, Vec<u8>, Vec<u8>)>,
}

impl OwnedEntryView {
    /// Fails on an unknown attribute description or a value invalid for its syntax.
    pub fn new(schema: &Schema, entry: &Entry) -> Result<OwnedEntryView, LdapError> {
        let mut attributes = Vec::with_capacity(entry.attributes.len());
        for attribute in &entry.attributes {
            let description = schema.parse_description(&attribute.description)?;
            let mut values = Vec::with_capacity(attribute.values.len());
            for value in &attribute.values {
                values.push((
                    value.clone(),
                    schema.normalize_value(description.attr, value)?,
                ));
            }
            attributes.push((description.attr, description.options, values));
        }
        let mut dn_avas = Vec::new();
        for rdn in &entry.dn.rdns {
            for ava in &rdn.avas {
                let attr = schema.attribute(&ava.attr).ok_or_else(|| {
                    LdapError::new(
                        ResultCode::InvalidDnSyntax,
                        format!("unknown attribute type '{}' in DN", ava.attr),
                    )
                })?;
                let normalized = schema.normalize_value(attr, &ava.value)?;
                dn_avas.push((attr, ava.value.clone(), normalized));
            }
        }
        // entryDN is virtual (never stored) but filters may test it, as in OpenLDAP.
        if let Some(entry_dn) = schema.attribute("entryDN") {
            if !attributes.iter().any(|(attr, _, _)| *attr == entry_dn) {
                let original = entry.dn.to_string().into_bytes();
                let normalized = schema.normalize_dn(&entry.dn)?.into_bytes();
                attributes.push((entry_dn, Vec::new(), vec![(original, normalized)]));
            }
        }
        Ok(OwnedEntryView {
            attributes,
            dn_avas,
        })
    }
}

impl EntryView for OwnedEntryView {
    fn for_each_attribute(&self, visit: &mut AttributeVisitor<'_>) {
        for (attr, options, values) in &self.attributes {
            let mut iterator = values.iter().map(|(original, normalized)| StoredValue {
                original,
                normalized,
            });
            if !visit(*attr, options, &mut iterator) {
                return;
            }
        }
    }

    fn for_each_dn_ava(&self, visit: &mut dyn FnMut(AttrId, StoredValue<'_>) -> bool) {
        for (attr, original, normalized) in &self.dn_avas {
            let value = StoredValue {
                original,
                normalized,
            };
            if !visit(*attr, value) {
                return;
            }
        }
    }
}
