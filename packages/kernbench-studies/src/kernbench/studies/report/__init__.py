"""The report generator: figures, numbers, claims and tables from study results, then latexmk (see ``build``)."""
