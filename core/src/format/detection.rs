//! The detection report: why each format driver accepted or declined a file, and the one
//! line the "no format driver recognises this file" error gives from it.

/// For each driver in order: its name and `Ok(())` if it accepted the file or the reason it
/// declined. Detection stops at the first driver that accepts.
#[derive(Debug, Clone, Default)]
pub struct DetectionReport {
    /// (driver name, verdict) in the order tried.
    pub verdicts: Vec<(&'static str, std::result::Result<(), String>)>,
}

impl DetectionReport {
    /// The driver that accepted the file, if any.
    pub fn chosen(&self) -> Option<&'static str> {
        self.verdicts.iter().find(|(_, v)| v.is_ok()).map(|(n, _)| *n)
    }

    /// The most likely reason no driver took the file, in a few words: the reason of the
    /// first driver that recognised the file as its kind and declined it (not a "not mine"
    /// answer), else the most general driver's (generic TIFF: what the file lacks for any
    /// TIFF-based slide, "IFD 0 is not tiled"), or, for a file that is not TIFF at all, that
    /// it is neither TIFF, DICOM nor MIRAX with the TIFF parser's reason. [`Self::one_line`] and
    /// `slidestream info --why` give every driver's.
    pub fn most_likely(&self) -> String {
        // A driver that recognised its own kind of file and then declined it says the most
        // ("ventana: XMLPacket of IFD 0: broken XML", "mirax: Slidedat.ini line 7: ..."); the
        // usual "not mine" answers of the drivers' detection are the weak ones below.
        const WEAK: &[&str] = &[
            "has no ", "does not start with", "is not tiled", "not a TIFF file", "does not have .mrxs", "not DICOM", "Is a TIFF file",
            "Dual-personality", "is not OME-XML", "does not name the Leica", "is not XML", "XML default namespace is not", "XML root",
            "iScan not in", "not an SQLite database",
        ];
        for (name, v) in &self.verdicts {
            if let Err(r) = v {
                if !WEAK.iter().any(|w| r.contains(w)) {
                    return format!("{name}: {}", r.strip_prefix("unsupported: ").unwrap_or(r));
                }
            }
        }
        let Some((_, Err(last))) = self.verdicts.last() else {
            return "no format driver took it".into();
        };
        let last = last.strip_prefix("unsupported: ").unwrap_or(last);
        match last.strip_prefix("not a TIFF file") {
            Some(rest) => format!("not a TIFF, DICOM or MIRAX (.mrxs) slide file{rest}"),
            None => format!("a TIFF file no slide format takes: {last}"),
        }
    }

    /// The verdicts on one line (`driver: reason; ...`), for error messages.
    pub fn one_line(&self) -> String {
        self.verdicts
            .iter()
            .map(|(n, v)| match v {
                Ok(()) => format!("{n}: accepted"),
                Err(w) => format!("{n}: {w}"),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl std::fmt::Display for DetectionReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, v) in &self.verdicts {
            match v {
                Ok(()) => writeln!(f, "{name}: accepted")?,
                Err(why) => writeln!(f, "{name}: declined: {why}")?,
            }
        }
        Ok(())
    }
}
