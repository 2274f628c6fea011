DROP TABLE price_books;
DROP TABLE tenants;
