//! A small XML well-formedness check for the tests: balanced and properly nested elements, quoted attributes
//! without duplicates, known or numeric entities only, no stray `<` or `&` in text, one root element.

/// Returns `Err(description)` at the first well-formedness error.
pub fn check_well_formed(xml: &str) -> Result<(), String> {
    let bytes = xml.as_bytes();
    let mut i = 0;
    let mut stack: Vec<String> = Vec::new();
    let mut roots = 0;
    while i < bytes.len() {
        if bytes[i] == b'<' {
            let rest = &xml[i..];
            if rest.starts_with("<?") {
                i += rest.find("?>").ok_or("unterminated processing instruction")? + 2;
            } else if rest.starts_with("<!--") {
                let end = rest.find("-->").ok_or("unterminated comment")?;
                if rest[4..end].contains("--") {
                    return Err("'--' inside a comment".into());
                }
                i += end + 3;
            } else if rest.starts_with("<!DOCTYPE") {
                i += rest.find('>').ok_or("unterminated doctype")? + 1;
            } else if let Some(after) = rest.strip_prefix("</") {
                let end = after.find('>').ok_or("unterminated end tag")?;
                let name = after[..end].trim_end();
                let open = stack
                    .pop()
                    .ok_or_else(|| format!("end tag </{name}> without start tag"))?;
                if open != name {
                    return Err(format!("<{open}> closed by </{name}>"));
                }
                i += 2 + end + 1;
            } else {
                let end = find_tag_end(rest).ok_or("unterminated start tag")?;
                let inner = &rest[1..end];
                let (inner, self_closing) = match inner.strip_suffix('/') {
                    Some(s) => (s, true),
                    None => (inner, false),
                };
                let name = check_start_tag(inner)?;
                if stack.is_empty() {
                    roots += 1;
                }
                if !self_closing {
                    stack.push(name);
                }
                i += end + 1;
            }
        } else {
            let next = xml[i..].find('<').map(|p| i + p).unwrap_or(xml.len());
            let text = &xml[i..next];
            if stack.is_empty() && !text.trim().is_empty() {
                return Err(format!("text outside the root element: {text:?}"));
            }
            check_text(text)?;
            i = next;
        }
    }
    if let Some(open) = stack.pop() {
        return Err(format!("<{open}> never closed"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    Ok(())
}

/// Index of the `>` ending the tag that starts `s`, skipping quoted attribute values.
fn find_tag_end(s: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    None
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '-' | '.'))
}

fn check_start_tag(inner: &str) -> Result<String, String> {
    let name_end = inner.find(char::is_whitespace).unwrap_or(inner.len());
    let name = &inner[..name_end];
    if !is_name(name) {
        return Err(format!("bad element name {name:?}"));
    }
    let mut rest = inner[name_end..].trim_start();
    let mut seen: Vec<&str> = Vec::new();
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or_else(|| format!("attribute without value in <{name}>"))?;
        let attr = rest[..eq].trim();
        if !is_name(attr) {
            return Err(format!("bad attribute name {attr:?} in <{name}>"));
        }
        if seen.contains(&attr) {
            return Err(format!("duplicate attribute {attr} in <{name}>"));
        }
        seen.push(attr);
        let value_part = rest[eq + 1..].trim_start();
        let quote = value_part.chars().next().ok_or("missing attribute value")?;
        if quote != '"' && quote != '\'' {
            return Err(format!("unquoted attribute {attr} in <{name}>"));
        }
        let close = value_part[1..]
            .find(quote)
            .ok_or_else(|| format!("unterminated attribute {attr}"))?;
        let value = &value_part[1..1 + close];
        if value.contains('<') {
            return Err(format!("'<' in attribute {attr}"));
        }
        check_text(value)?;
        let after = &value_part[close + 2..];
        if !after.is_empty() && !after.starts_with(char::is_whitespace) {
            return Err(format!("no space after attribute {attr} in <{name}>"));
        }
        rest = after.trim_start();
    }
    Ok(name.to_string())
}

fn check_text(text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        let after = &rest[amp + 1..];
        let semi = after.find(';').ok_or("'&' without ';'")?;
        let entity = &after[..semi];
        let ok = matches!(entity, "amp" | "lt" | "gt" | "quot" | "apos")
            || entity
                .strip_prefix("#x")
                .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
            || entity
                .strip_prefix('#')
                .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
        if !ok {
            return Err(format!("unknown entity &{entity};"));
        }
        rest = &after[semi + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_well_formed;

    #[test]
    fn accepts_well_formed_and_rejects_broken() {
        assert!(check_well_formed("<?xml version=\"1.0\"?><a x=\"1\"><b/>t &amp; &#215;<!-- c --></a>").is_ok());
        for bad in [
            "<a><b></a>",
            "<a>",
            "<a x=1/>",
            "<a>&nbsp;</a>",
            "<a>x & y</a>",
            "<a/><b/>",
            "<a x=\"1\" x=\"2\"/>",
            "</a>",
        ] {
            assert!(check_well_formed(bad).is_err(), "{bad}");
        }
    }
}
