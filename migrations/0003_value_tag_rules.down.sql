DROP TABLE value_tag_rules;
