"""Load options: the new format options change the fingerprint only when set, and travel as JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ipmeta_cli.loading import add_source_arguments, load_options
from loader.options import LoadOptions
from loader.pipeline.descriptor import LoadDescriptor, Source

#: ``LoadOptions(columns=("start", "end", "asn", "organization"), index_field="asn").fingerprint()``
#: before formats existed: `make run`'s store must not see its dataset as changed.
ASN_FINGERPRINT = "543e7f883ccfabc8"


def test_options_left_at_their_defaults_keep_the_fingerprint_loads_always_had() -> None:
    before = LoadOptions(columns=("start", "end", "asn", "organization"), index_field="asn")
    assert before.fingerprint() == ASN_FINGERPRINT
    assert (
        LoadOptions(
            columns=("start", "end", "asn", "organization"), index_field="asn", format="auto"
        ).fingerprint()
        == before.fingerprint()
    )
    # The Locations file is data: its bytes enter the checksum (start), not the fingerprint
    assert LoadOptions(locations="/a/Locations-en.csv").fingerprint() == LoadOptions().fingerprint()


@pytest.mark.parametrize(
    "changed",
    [
        LoadOptions(format="mmdb"),
        LoadOptions(mmdb_fields={"country": "country.iso_code"}),
        LoadOptions(types={"lat": "float"}),
    ],
)
def test_a_format_option_that_is_set_is_a_change(changed: LoadOptions) -> None:
    assert changed.fingerprint() != LoadOptions().fingerprint()


def test_the_options_travel_in_the_load_descriptor() -> None:
    # Given every format option set
    options = LoadOptions(
        format="geoip2-csv",
        types={"lat": "float", "postcode": "str"},
        mmdb_fields={"country": "country.iso_code"},
        locations="s3://bucket/GeoLite2-City-Locations-en.csv",
    )
    # When the descriptor is staged as JSON and read back by another process
    descriptor = LoadDescriptor("v3", 3, (Source.of("a.csv"),), options, "sum", options.fingerprint(), 1.0)
    again = LoadDescriptor.from_json(descriptor.to_json())
    # Then the workers read the sources exactly as the load was asked to
    assert again.options == options
    assert again.options.fingerprint() == options.fingerprint()
    formats = again.options.format_options(Path("/tmp/Locations.csv"))
    assert (formats.format, formats.locations, dict(formats.declared_types)) == (
        "geoip2-csv",
        Path("/tmp/Locations.csv"),
        {"lat": "float", "postcode": "str"},
    )


def test_an_execution_input_may_spell_the_options_as_the_command_line_does() -> None:
    options = LoadOptions.from_event(
        {"format": "mmdb", "types": "lat=float,postcode=str", "mmdb_fields": "country=country.iso_code,lat"}
    )
    assert options.types == {"lat": "float", "postcode": "str"}
    assert options.mmdb_fields == {"country": "country.iso_code", "lat": "lat"}
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        LoadOptions.from_event({"format": "xml"})
    with pytest.raises(ValueError, match="unknown type 'double'"):
        LoadOptions.from_event({"types": "lat=double"})


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ipmeta load", exit_on_error=False)
    parser.add_argument("files", nargs="*")
    parser.add_argument("--dry-run", action="store_true")
    add_source_arguments(parser)
    return parser.parse_args(argv)


def test_the_command_line_options_become_load_options() -> None:
    args = parse(
        "--format", "geoip2-csv", "--locations", "Locations-en.csv", "--types", "LAT=float,postcode=str",
        "--mmdb-fields", "country=country.iso_code", "Blocks-IPv4.csv",
    )  # fmt: skip
    options = load_options(args)
    assert options.format == "geoip2-csv"
    assert options.locations == "Locations-en.csv"
    assert options.types == {"lat": "float", "postcode": "str"}
    assert options.mmdb_fields == {"country": "country.iso_code"}


def test_a_bad_types_or_fields_value_fails_at_parse_time() -> None:
    with pytest.raises(argparse.ArgumentError, match="use int, float or str"):
        parse("--types", "lat=double")
    with pytest.raises(argparse.ArgumentError, match="names column 'a' twice"):
        parse("--mmdb-fields", "a=x,a=y")
