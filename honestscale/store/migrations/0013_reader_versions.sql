-- The reader that landed each file, "<format>@<version>" (collector/_read.reader_tag); NULL for event files and for
-- files landed before readers were versioned. A file whose reader has changed since is read again by the next
-- ingest that names it, and every ingest lists the others with the command that re-reads them.
ALTER TABLE ingested_files ADD COLUMN reader VARCHAR;
