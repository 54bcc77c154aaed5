"""`kafkactl dump-log`: Kafka's DumpLogSegments over segment, index (offset, time,
transaction) and snapshot files.

The reading and formatting live in kafkactl.log.dump (imported when the command runs, so
`--help` stays fast); this module only parses options.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kafkactl.cli._output import error, write_line

INT32_MAX = 2**31 - 1


def register(app: typer.Typer) -> None:
    @app.command("dump-log")
    def dump_log_command(
        files: list[Path] = typer.Argument(..., help=".log, .index, .timeindex, .txnindex or "
                                           ".snapshot files (comma-separated lists work "
                                           "too)."),
        print_data_log: bool = typer.Option(False, "--print-data-log",
                                            help="Print keys and payloads (implies "
                                                 "--deep-iteration)."),
        deep_iteration: bool = typer.Option(False, "--deep-iteration",
                                            help="Print one line per record."),
        skip_record_metadata: bool = typer.Option(False, "--skip-record-metadata",
                                                  help="Record lines without offset, "
                                                       "timestamp and sizes."),
        verify_index_only: bool = typer.Option(False, "--verify-index-only",
                                               help="Check index files against the .log "
                                                    "without printing entries."),
        index_sanity_check: bool = typer.Option(False, "--index-sanity-check",
                                                help="Run the startup sanity check on index "
                                                     "files."),
        max_bytes: int = typer.Option(INT32_MAX, "--max-bytes", min=0,
                                      help="Read at most this many bytes of each .log."),
        max_message_size: int = typer.Option(
            5 * 1024 * 1024, "--max-message-size", min=1,
            help="Accepted for DumpLogSegments' scripts; index checks read whole batches "
                 "(the rules of `kafkactl recover`)."),
        offsets_decoder: bool = typer.Option(
            False, "--offsets-decoder",
            help="Decode __consumer_offsets records: offset commits and group metadata "
                 "as JSON (implies --print-data-log)."),
        txn_log_decoder: bool = typer.Option(
            False, "--transaction-log-decoder",
            help="Decode __transaction_state records: each transactional id's state, "
                 "producer and partitions as JSON (implies --print-data-log)."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    ) -> None:
        """Dump log segments and indexes like Kafka's DumpLogSegments."""
        from kafkactl.log.dump import Options, Output, dump_files
        from kafkactl.record.batch import header_key_text

        class CountingOutput(Output):
            """Output that counts the files dumped and turns a closed stdout into the
            CLI's EPIPE rule (dump_files reports any Exception per file)."""

            dumped = 0

            def line(self, text: str, obj: dict[str, Any]) -> None:
                if obj.get("type") == "file":
                    self.dumped += 1
                if obj.get("header_keys"):
                    # a header key that is not UTF-8 prints as DumpLogSegments prints it
                    # (Java's lenient decode: U+FFFD), as keys and payloads do here
                    keys = obj["header_keys"]
                    shown = [header_key_text(k) for k in keys]
                    if shown != keys:
                        text = text.replace(f"headerKeys: [{','.join(keys)}]",
                                            f"headerKeys: [{','.join(shown)}]", 1)
                        obj = {**obj, "header_keys": shown}
                super().line(text, obj)

            def error(self, text: str, obj: dict[str, Any]) -> None:
                # the one error style; notes ("Ignoring unknown file") and index
                # findings stay as DumpLogSegments words them
                super().error(f"error: {text}" if obj.get("type") == "error" else text, obj)

        if offsets_decoder and txn_log_decoder:
            error("--offsets-decoder and --transaction-log-decoder: give one")
            raise typer.Exit(2)
        print_data_log = print_data_log or offsets_decoder or txn_log_decoder
        opts = Options(
            print_data=print_data_log, deep=deep_iteration or print_data_log,
            skip_metadata=skip_record_metadata, verify_only=verify_index_only,
            sanity_only=index_sanity_check, max_bytes=max_bytes,
            max_message_size=max_message_size, as_json=as_json,
            offsets_decoder=offsets_decoder, txn_log_decoder=txn_log_decoder,
        )
        paths = [Path(p) for f in files for p in str(f).split(",") if p]
        out = CountingOutput(opts, out=write_line)
        code = dump_files(paths, opts, out)
        if out.dumped == 0:
            dirs = [str(p) for p in paths if p.is_dir()]
            hint = (f" ({', '.join(dirs)}: a directory; give its files, e.g. "
                    f"{Path(dirs[0]) / '*.log'})" if dirs else "")
            error("nothing was dumped: give .log, .index, .timeindex, .txnindex or .snapshot "
                  "files"
                  + hint)
            code = max(code, 2)
        raise typer.Exit(code)
