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
        files: list[Path] = typer.Argument(None, help=".log, .index, .timeindex, .txnindex or "
                                           ".snapshot files (comma-separated lists work "
                                           "too)."),
        files_opt: list[str] = typer.Option(
            [], "--files", metavar="FILE1,FILE2,...",
            help="The files to dump, comma-separated, as DumpLogSegments takes them "
                 "(repeatable; dumped after the files given as arguments)."),
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
        key_decoder_class: str | None = typer.Option(
            None, "--key-decoder-class", metavar="CLASS",
            help="How keys print (implies --print-data-log): one of the decoders Kafka "
                 "ships, org.apache.kafka.tools.api.StringDecoder (the default), "
                 "IntegerDecoder, LongDecoder (a big-endian number) or DefaultDecoder (hex); "
                 "Kafka 3.x's kafka.serializer names too."),
        value_decoder_class: str | None = typer.Option(
            None, "--value-decoder-class", metavar="CLASS",
            help="How payloads print (implies --print-data-log); the decoders of "
                 "--key-decoder-class."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    ) -> None:
        """Dump log segments and indexes like Kafka's DumpLogSegments."""
        from kafkactl.log.dump import Options, Output, dump_files
        from kafkactl.log.dump_output import KAFKA_DECODERS
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
        decoders = {}
        for flag, name in (("--key-decoder-class", key_decoder_class),
                           ("--value-decoder-class", value_decoder_class)):
            if name is None:
                continue
            if name not in KAFKA_DECODERS:
                error(f"{flag} {name}: not a decoder Kafka ships (kafkactl cannot load "
                      f"Java classes); give one of {', '.join(KAFKA_DECODERS)}")
                raise typer.Exit(2)
            if offsets_decoder or txn_log_decoder:
                error(f"{flag} and --{'offsets' if offsets_decoder else 'transaction-log'}"
                      "-decoder: give one")
                raise typer.Exit(2)
            decoders[flag] = KAFKA_DECODERS[name]
        print_data_log = (print_data_log or offsets_decoder or txn_log_decoder
                          or bool(decoders))
        opts = Options(
            print_data=print_data_log, deep=deep_iteration or print_data_log,
            skip_metadata=skip_record_metadata, verify_only=verify_index_only,
            sanity_only=index_sanity_check, max_bytes=max_bytes,
            max_message_size=max_message_size, as_json=as_json,
            offsets_decoder=offsets_decoder, txn_log_decoder=txn_log_decoder,
            key_decoder=decoders.get("--key-decoder-class", "string"),
            value_decoder=decoders.get("--value-decoder-class", "string"),
        )
        paths = [Path(p) for f in [*map(str, files or []), *files_opt]
                 for p in f.split(",") if p]
        if not paths:
            error("no files: give them as arguments or with --files FILE1,FILE2,...")
            raise typer.Exit(2)
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
