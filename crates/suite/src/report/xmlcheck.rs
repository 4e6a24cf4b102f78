//! XML well-formedness for the tests of the SVG and HTML writers, checked by a real XML parser (roxmltree):
//! balanced and nested elements, quoted attributes without duplicates, known or numeric entities only, no stray `<`
//! or `&` in text, one root element.

/// Returns `Err(description)` at the first well-formedness error.
pub fn check_well_formed(xml: &str) -> Result<(), String> {
    roxmltree::Document::parse(xml).map(|_| ()).map_err(|e| e.to_string())
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
            "<a><!-- x -- y --></a>",
        ] {
            assert!(check_well_formed(bad).is_err(), "{bad}");
        }
    }
}
